r"""What a fitted :class:`~pyro_dropout.guides.DropoutGuide` holds, for reading: the expected weights,
the drop probabilities and the family of each site."""

from __future__ import annotations

from typing import Any

import pyro.distributions as dist
import torch

from ..distributions import BernoulliDropout, ConcreteDropout

__all__ = ["DropoutSummaries"]


class DropoutSummaries:
    """The summaries of :class:`~pyro_dropout.guides.DropoutGuide` (a mixin: it reads the guide's
    roles, means and rates)."""

    prototype_trace: Any
    _roles: dict[str, Any]
    locs: Any

    def _rate_of(self, name: str, role: Any) -> torch.Tensor | float:
        raise NotImplementedError

    def _require_setup(self) -> None:
        if self.prototype_trace is None:
            raise RuntimeError(
                "DropoutGuide: call the guide once with the training arguments, observations included "
                "(guide(x, y)), or run an SVI step, before asking for values"
            )

    @torch.no_grad()
    def median(self, *args: Any, **kwargs: Any) -> dict[str, torch.Tensor]:
        r"""The expected weights :math:`\mathbb{E}_q[W] = M` (and point estimates).

        Running the model on these is "standard dropout" prediction (paper [1], §4):
        the weight-averaging approximation to the MC-dropout predictive mean.
        """
        self._require_setup()
        return {
            name: role.prior.mean.detach().clone()
            if role.prior is not None
            else role.get(self.locs).detach().clone()
            for name, role in self._roles.items()
        }

    @torch.no_grad()
    def dropout_rates(self) -> dict[str, torch.Tensor]:
        """The drop probability ``p`` of every masked weight site (learned or fixed)."""
        self._require_setup()
        out = {}
        for name, role in self._roles.items():
            if role.prior is not None:  # a network's own dropout: its fixed p
                out[name] = torch.as_tensor(1.0 - role.prior.base_dist.probs.flatten()[0]).detach().clone()
            elif role.masked and (
                role.event_dim >= 2 or role.learn_p or isinstance(role.p, torch.Tensor) or role.p > 0
            ):
                p = self._rate_of(name, role)
                ref = self._roles[name].get(self.locs)
                out[name] = torch.as_tensor(p, dtype=ref.dtype, device=ref.device).detach().clone()
        return out

    def site_families(self) -> dict[str, type]:
        """The distribution class used for each latent site (for inspection)."""
        self._require_setup()
        return {
            n: type(r.prior)
            if r.prior is not None
            else (ConcreteDropout if r.learn_p else BernoulliDropout)
            if r.masked
            else dist.Delta
            for n, r in self._roles.items()
        }
