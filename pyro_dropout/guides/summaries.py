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
    def quantiles(self, quantiles: Any, *args: Any, **kwargs: Any) -> dict[str, torch.Tensor]:
        r"""The ``quantiles`` of each site's variational marginal, stacked first (Pyro's
        ``AutoGuide.quantiles``): a point estimate's are its value; a masked weight takes two
        values, 0 (its unit dropped, with probability :math:`p`) and :math:`m/(1-p)`, so its
        :math:`q`-quantile is the lower of the two where :math:`q` is at most that one's
        probability, else the higher. A converted network's own dropout masks activations, not
        weights: its weights have no such marginal (``NotImplementedError``, as Pyro's guides)."""
        self._require_setup()
        qs = torch.as_tensor(quantiles, dtype=torch.get_default_dtype()).reshape(-1)
        if qs.numel() == 0 or bool((qs < 0).any()) or bool((qs > 1).any()):
            raise ValueError(f"DropoutGuide.quantiles: quantiles must lie in [0, 1], got {quantiles!r}")
        out, rates = {}, self.dropout_rates()
        for name, role in self._roles.items():
            if role.prior is not None or role.network:
                raise NotImplementedError(
                    f"DropoutGuide.quantiles: site '{name}' is masked by the network's own dropout (its "
                    "activations, not its weights): its weights have no quantiles of their own"
                )
            value = role.get(self.locs).detach()
            if name not in rates or not role.masked:
                out[name] = value.expand(len(qs), *value.shape).clone()
                continue
            p = rates[name].to(value.dtype)
            kept = value / (1 - p)
            low, high = (
                torch.minimum(kept, torch.zeros_like(kept)),
                torch.maximum(kept, torch.zeros_like(kept)),
            )
            p_low = torch.where(kept >= 0, p, 1 - p)  # the probability of the lower value
            q = qs.to(value.dtype).reshape(-1, *([1] * value.dim()))
            out[name] = torch.where(q <= p_low, low, high)
        return out

    @torch.no_grad()
    def dropout_rates(self) -> dict[str, torch.Tensor]:
        """The drop probability ``p`` of every masked weight site (learned or fixed); :meth:`explain`
        says why a site is not masked."""
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

    @torch.no_grad()
    def explain(self) -> str:
        """How the guide treats each latent site: its family, its rate and the units it masks, or
        why it is a point estimate (a weight declared with batch dims, not ``.to_event(2)``, say)."""
        self._require_setup()
        lines = ["DropoutGuide:"]
        rates = self.dropout_rates()
        for name, role in self._roles.items():
            value = role.prior.mean if role.prior is not None else role.get(self.locs)
            shape = tuple(value.shape)
            if role.prior is not None:
                what = f"the network's own dropout, p = {float(rates[name]):.3g}"
            elif role.masked and name in rates:
                family = "Concrete dropout, p learned" if role.learn_p else "Bernoulli dropout"
                what = f"{family}, p = {float(rates[name].flatten()[0]):.3g}, over its input units"
            elif role.event_dim < 2 and len(shape) >= 2:
                what = (
                    f"a point estimate: its {len(shape)} dims are batch dims (event_dim {role.event_dim}); "
                    "a weight is masked where it is declared .to_event(2) (rows outputs, columns inputs)"
                )
            elif role.masked:
                what = "a point mass (p = 0: no rate declared for it, or a single input unit)"
            else:
                what = "a point estimate (MAP)"
            lines.append(f"  {name} {shape}: {what}")
        if not self._roles:
            lines.append("  no latent site: no layer was made Bayesian; the network's own dropout draws")
        return "\n".join(lines)

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
