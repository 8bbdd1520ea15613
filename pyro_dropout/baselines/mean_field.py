r"""Mean-field Gaussian variational inference (Graves 2011; Blundell et al. 2015), with analytic KL."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from operator import attrgetter
from typing import Any

import pyro
import pyro.distributions as dist
import torch
from pyro.distributions import constraints
from pyro.infer.autoguide import AutoGuide
from pyro.infer.autoguide.initialization import InitMessenger
from pyro.infer.autoguide.utils import deep_setattr
from pyro.nn import PyroModule, PyroParam

from ..guides import init_to_fan_in

__all__ = ["MeanFieldGuide"]


class MeanFieldGuide(AutoGuide):
    r"""A diagonal Gaussian :math:`q(w) = \prod_i \mathcal{N}(w_i; m_i, s_i^2)` over every real-valued site.

    Unlike :class:`~pyro.infer.autoguide.AutoNormal`, each model site is sampled directly
    from its Normal, so :class:`~pyro_dropout.infer.DropoutELBO` (or ``TraceMeanField_ELBO``)
    uses the analytic Gaussian KL against a Gaussian prior (e.g. ``MLP(prior="normal")``).
    Sites with a constrained support get a MAP point estimate. The standard deviations start
    at ``init_scale`` (small, as is usual for Bayes by backprop).

    Usage:

        model = MLP(13, hidden=(50,), tau=1.0, prior="normal")
        guide = MeanFieldGuide(model)
    """

    def __init__(
        self, model: Callable, *, init_scale: float = 1e-2, init_loc_fn: Callable = init_to_fan_in
    ) -> None:
        if not init_scale > 0:
            raise ValueError(f"MeanFieldGuide: init_scale must be positive, got {init_scale}")
        self.init_scale = float(init_scale)
        self.init_loc_fn = init_loc_fn
        super().__init__(InitMessenger(init_loc_fn)(model))

    def _setup_prototype(self, *args: Any, **kwargs: Any) -> None:
        super()._setup_prototype(*args, **kwargs)
        assert self.prototype_trace is not None
        self.locs, self.scales = PyroModule(), PyroModule()
        self._sites: list[tuple[str, int, bool, tuple, Callable]] = []
        for name, site in self.prototype_trace.iter_stochastic_nodes():
            fn, init = site["fn"], site["value"].detach()
            gaussian = (
                fn.support is constraints.real
                or getattr(fn.support, "base_constraint", None) is constraints.real
            )
            deep_setattr(
                self.locs, name, PyroParam(init, constraints.real if gaussian else fn.support, fn.event_dim)
            )
            if gaussian:
                deep_setattr(
                    self.scales,
                    name,
                    PyroParam(
                        torch.full_like(init, self.init_scale), constraints.softplus_positive, fn.event_dim
                    ),
                )
            frames = tuple(f for f in site["cond_indep_stack"] if f.vectorized)
            self._sites.append((name, fn.event_dim, gaussian, frames, attrgetter(name)))

    def forward(self, *args: Any, **kwargs: Any) -> dict[str, torch.Tensor]:
        if self.prototype_trace is None:
            self._setup_prototype(*args, **kwargs)
        plates = self._create_plates(*args, **kwargs)
        result = {}
        for name, event_dim, gaussian, frames, get in self._sites:
            with ExitStack() as stack:
                for frame in frames:
                    stack.enter_context(plates[frame.name])
                loc = get(self.locs)
                fn = (
                    dist.Normal(loc, get(self.scales)).to_event(event_dim)
                    if gaussian
                    else dist.Delta(loc, event_dim=event_dim)
                )
                result[name] = pyro.sample(name, fn)
        return result

    @torch.no_grad()
    def median(self, *args: Any, **kwargs: Any) -> dict[str, torch.Tensor]:
        """The posterior means (medians) of every site."""
        return {name: get(self.locs).detach().clone() for name, *_, get in self._sites}
