r"""``BBAlpha``: the reparameterised black-box α-divergence energy of Li & Gal (2017)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from pyro.infer import ELBO
from pyro.poutine.trace_struct import Trace

from ..ops import is_positive_int, is_positive_number, log_mean_exp
from .input_checks import check_finite_inputs, check_graph, check_not_empty, refuse_jit
from .loss_terms import (
    PARTICLE_PLATE,
    DropoutTraceMixin,
    latent_penalty,
    likelihood_sites,
    sum_terms,
)

__all__ = ["BBAlpha", "log_mean_exp"]


def _factor_log_likelihoods(model_trace: Trace, particle_dim: int | None) -> list[tuple[torch.Tensor, Any]]:
    """Per-factor log-likelihoods ``[K, *plates]`` (particles first) and their scales.

    Observed sites in the same set of plates are summed into one factor per plate element.
    """
    groups: dict[frozenset, tuple[torch.Tensor, Any]] = {}
    for name, site in likelihood_sites(model_trace):
        key = frozenset(f.name for f in site["cond_indep_stack"] if f.vectorized and f.name != PARTICLE_PLATE)
        log_p = site["unscaled_log_prob"]
        if site["mask"] is not None:
            log_p = torch.where(site["mask"], log_p, torch.zeros_like(log_p))
        if particle_dim is None:
            log_p = log_p.unsqueeze(0)
        else:
            log_p = log_p.reshape((1,) * max(0, -particle_dim - log_p.dim()) + log_p.shape)
            log_p = log_p.movedim(particle_dim, 0)
        scale = site["scale"]
        if key in groups:
            previous, previous_scale = groups[key]
            if not (
                isinstance(scale, float) and isinstance(previous_scale, float) and scale == previous_scale
            ):
                raise ValueError(f"BBAlpha: site '{name}' shares plates with another site but not its scale")
            log_p = previous + log_p
        groups[key] = (log_p, scale)
    return list(groups.values())


class BBAlpha(DropoutTraceMixin, ELBO):
    r"""The reparameterised BB-α energy of dropout inference (paper [1], eq. 6-7).

    $$
    \mathcal{L}_\alpha = \mathrm{KL}(q\,\|\,p) - \frac{1}{\alpha}\sum_n
    \log \frac{1}{K}\sum_{k=1}^{K} p(y_n \mid x_n, \omega_k)^{\alpha},
    \qquad \omega_k \sim q,
    $$

    the log-mean-exp taken per data point over ``K = num_particles`` mask draws, the KL
    analytic (:mod:`pyro_dropout.distributions.kl`). Every element of the model's plates
    is one factor :math:`n` (observed sites in the same plates are multiplied together);
    under minibatching (``pyro.plate(..., subsample_size=)`` or ``poutine.scale``) the
    per-point terms are scaled by :math:`N/|B|` outside the logarithm. :math:`\alpha = 1`
    fits the predictive log-likelihood; :math:`\alpha \to 0` recovers the negative ELBO
    with ``K`` particles (the residual is :math:`\approx \tfrac{\alpha}{2}\,\mathrm{Var}_k`
    of the per-point log-likelihood); ``K = 1`` is the ELBO for any α. Pyro's
    ``RenyiELBO`` is a different (global) bound, not this one.

    ``loss`` returns :math:`\mathcal{L}_\alpha` (to be minimised), ``differentiable_loss``
    the same as a tensor, ``loss_and_grads`` also back-propagates it.

    Usage:

        svi = SVI(model, guide, pyro.optim.Adam({"lr": 1e-3}), loss=BBAlpha(0.5, num_particles=10))

    :param alpha: the divergence parameter, > 0.
    :param num_particles: ``K``, the number of mask draws per step.
    :param vectorize_particles: draw the ``K`` particles in one vectorised pass.
    :param per_example_masks: draw the ``K`` masks of each data point independently of
        the other points' (each per-point term still averages ``K`` draws), instead of
        ``K`` masks shared by the minibatch (:mod:`pyro_dropout.nn.masking`).
    :param graph: ``"record"`` (default), ``"compile"`` or ``"eager"``, as for
        :class:`~pyro_dropout.infer.DropoutELBO`: a graph replays a call only under a guard read at
        every call; what no guard can cover runs eagerly.

    References

    [1] Y. Li, Y. Gal. *Dropout Inference in Bayesian Neural Networks with Alpha-divergences.*
    ICML 2017.
    """

    def __init__(
        self,
        alpha: float,
        num_particles: int = 10,
        vectorize_particles: bool = True,
        max_plate_nesting: float = float("inf"),
        check_finite: bool = True,
        per_example_masks: bool = False,
        graph: str = "record",
        **kwargs: Any,
    ) -> None:
        refuse_jit(kwargs, "BBAlpha")
        if not is_positive_number(alpha):
            raise ValueError(f"BBAlpha: alpha must be a positive finite number, got {alpha!r}")
        if not is_positive_int(num_particles):
            raise ValueError(f"BBAlpha: num_particles must be a positive int, got {num_particles!r}")
        super().__init__(
            num_particles=num_particles,
            vectorize_particles=vectorize_particles,
            max_plate_nesting=max_plate_nesting,
            **kwargs,
        )
        self.alpha = float(alpha)
        self.check_finite = check_finite
        self.per_example_masks = bool(per_example_masks)
        self.graph = check_graph("BBAlpha", graph)

    def _particle_terms(self, model: Callable, guide: Callable, args: tuple, kwargs: dict) -> tuple:
        """The mean KL over particles and the per-factor log-likelihoods ``[K, ...]``."""
        if self.vectorize_particles:
            if self.max_plate_nesting == float("inf"):
                self._guess_max_plate_nesting(model, guide, args, kwargs)
            model_trace, guide_trace = self._get_vectorized_trace(model, guide, args, kwargs)
            particle_dim = -int(self.max_plate_nesting) if self.num_particles > 1 else None
            penalty = latent_penalty(model_trace, guide_trace) / self.num_particles
            return penalty, _factor_log_likelihoods(model_trace, particle_dim)
        penalties, per_particle = [], []
        for _ in range(self.num_particles):
            model_trace, guide_trace = self._get_trace(model, guide, args, kwargs)
            penalties.append(latent_penalty(model_trace, guide_trace))
            per_particle.append(_factor_log_likelihoods(model_trace, None))
        factors = [
            (torch.cat([p[i][0] for p in per_particle]), per_particle[0][i][1])
            for i in range(len(per_particle[0]))
        ]
        return torch.stack(penalties).mean(), factors

    def differentiable_loss(
        self, model: Callable, guide: Callable, *args: Any, **kwargs: Any
    ) -> torch.Tensor:
        check_not_empty(args, kwargs)
        if self.check_finite:
            check_finite_inputs(args, kwargs)
        self.check_particles(model, guide, args, kwargs)
        penalty, factors = self._particle_terms(model, guide, args, kwargs)
        fit = sum_terms((scale * log_mean_exp(self.alpha * log_p, dim=0)).sum() for log_p, scale in factors)
        return penalty - fit / self.alpha
