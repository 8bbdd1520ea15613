r"""Analytic KL divergences between the dropout families and Gaussian priors.

All registrations of the package live here. For a dropout family
:math:`q(W)`, :math:`W = M\,\mathrm{diag}(z)/(1-p)` with :math:`K` dropped units, and a
prior :math:`\mathcal{N}(\mu, s^2)` on every weight (prior length-scale :math:`l = 1/s`),

$$
\mathrm{KL}(q\,\|\,p) = \sum_{e} \Big[\frac{\mathbb{E}_q (w_e-\mu_e)^2}{2 s_e^2}
+ \log s_e + \tfrac12\log 2\pi - \log\delta\Big] - K\,\mathcal{H}(p),
\qquad
\mathbb{E}_q (w-\mu)^2 = \frac{m^2}{1-p} - 2 m\mu + \mu^2,
$$

with :math:`\mathcal{H}(p) = -p\log p - (1-p)\log(1-p)`. For :math:`\mu = 0` the
weight term is :math:`\frac{l^2}{2(1-p)}\lVert M\rVert^2`: the KL of paper [1], eq. 3,
in the inverted-dropout scaling (:math:`\mathbb{E}_q W = M`) that this package uses.

* Against :class:`~pyro_dropout.distributions.QuantisedGaussian` the formula is the exact
  KL between two discrete distributions on the grid of cell width :math:`\delta` (up to
  :math:`O(\delta^2)` and assuming no unit's weights are all zero). Without a
  ``resolution`` the per-weight constant :math:`-\log\delta` is omitted, i.e. the KL is
  measured relative to the grid cell, consistently with ``QuantisedGaussian.log_prob``.
* Against a continuous :class:`~torch.distributions.Normal` the KL of a discrete
  :math:`q` is infinite. We return the small-variance limit of the mixture-of-Gaussians
  approximation (paper [2], Proposition 1) with its divergent, parameter-free constant
  removed: the same value as for a ``QuantisedGaussian`` without a resolution.
* Priors may be wrapped in :class:`~torch.distributions.Independent` (``.to_event``) and
  expanded by plates; the dropout family must cover at least the prior's event dims.
  ``p = 0`` (a point mass, used for biases) has no entropy term.
* For :class:`~pyro_dropout.distributions.ConcreteDropout` the Bernoulli KL is used, as in
  paper [1], appendix B (accurate for low temperatures).
* :class:`~pyro_dropout.distributions.NetworkDropout` (a converted network whose own dropout
  modules draw the masks) has the Bernoulli family's KL.

References

[1] Y. Gal, J. Hron, A. Kendall. *Concrete Dropout.* NeurIPS 2017.
[2] Y. Gal, Z. Ghahramani. *Dropout as a Bayesian Approximation: Insights and Applications.* 2016.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch.distributions import Distribution, Independent, Normal, register_kl

from ..ops import HALF_LOG_2PI
from .bernoulli_dropout import BernoulliDropout
from .concrete_dropout import ConcreteDropout
from .masked_weight import MaskedWeight
from .network_dropout import NetworkDropout
from .quantised_gaussian import QuantisedGaussian

__all__ = ["bernoulli_entropy", "kl_masked_gaussian", "kl_terms"]


def bernoulli_entropy(p: torch.Tensor) -> torch.Tensor:
    r""":math:`\mathcal{H}(p) = -p\log p - (1-p)\log(1-p)`, finite (zero) at ``p = 0``."""
    return -(torch.special.xlogy(p, p) + torch.special.xlog1py(1 - p, -p))


def _compact(t: torch.Tensor) -> torch.Tensor:
    """Narrow every broadcast (stride-0) dim of ``t`` to size 1: a free view."""
    for dim, (size, stride) in enumerate(zip(t.shape, t.stride(), strict=True)):
        if size > 1 and stride == 0:
            t = t.narrow(dim, 0, 1)
    return t


def _sum_event(x: torch.Tensor, event_shape: torch.Size) -> torch.Tensor:
    """Sum the rightmost ``len(event_shape)`` dims of ``x`` after broadcasting them to it."""
    n = len(event_shape)
    if n == 0:
        return x
    if x.dim() < n:
        x = x.reshape((1,) * (n - x.dim()) + x.shape)
    if x.shape[x.dim() - n :] != event_shape:
        x = x.expand(x.shape[: x.dim() - n] + event_shape)
    return x.sum(dim=tuple(range(-n, 0)))


def _small_squares(
    loc: torch.Tensor, mu: torch.Tensor, ratio: torch.Tensor | float, event: torch.Size
) -> torch.Tensor:
    r""":math:`\sum_e (m_e - \mu)^2 + r \sum_e m_e^2` elementwise. A fixed (float) ``r`` takes one
    ``addcmul`` and one sum: on a small network's traced step the KL's differentiable operations
    (each a node of the backward pass) cost more than their arithmetic."""
    centred = loc - mu
    if not isinstance(ratio, float):
        return _sum_event(centred * centred, event) + _sum_event(ratio * (loc * loc), event)
    if ratio == 0.0:
        return _sum_event(centred * centred, event)
    if centred.shape != loc.shape:  # a prior mean with dims the means lack
        return _sum_event(centred * centred, event) + ratio * _sum_event(loc * loc, event)
    return _sum_event(torch.addcmul(centred * centred, loc, loc, value=ratio), event)


def _batch_part(t: torch.Tensor, event_dim: int) -> torch.Tensor | None:
    """``t`` without its event dims if it is constant over them (size 1 there), else None."""
    batch_dim = max(t.dim() - event_dim, 0)
    if any(size != 1 for size in t.shape[batch_dim:]):
        return None
    batch = t.shape[:batch_dim]
    while batch and batch[0] == 1:  # leading size-1 dims broadcast anyway
        batch = batch[1:]
    return t.reshape(batch)


def kl_masked_gaussian(
    q: MaskedWeight, prior_loc: torch.Tensor, prior_scale: torch.Tensor, log_resolution: float
) -> torch.Tensor:
    r"""The KL of the module docstring, of shape ``q.batch_shape``.

    ``prior_loc`` and ``prior_scale`` broadcast against ``q.batch_shape + q.event_shape``.
    Uses :math:`\mathbb{E}_q(w-\mu)^2 = (m-\mu)^2 + m^2\,p/(1-p)`. Broadcast (expanded)
    dims are computed once, so the cost does not grow with the number of vectorised
    particles; a fixed (Python) ``p`` and a prior that is the same for all of a site's
    weights (one per run, say) keep the work to a few reductions over ``M``.
    """
    loc = _compact(q.loc)
    mu, scale = _compact(prior_loc), _compact(prior_scale)
    event = q.event_shape
    if q.is_point_mass:
        ratio: torch.Tensor | float = 0.0
    elif isinstance(q.p, torch.Tensor):
        p = _compact(q.p)
        ratio = (p / (1.0 - p)).reshape(p.shape + (1,) * q.event_dim)
    else:
        ratio = q.p / (1.0 - q.p)
    mu_batch, scale_batch = _batch_part(mu, len(event)), _batch_part(scale, len(event))
    if mu_batch is not None and scale_batch is not None:
        # one prior for all of a site's weights (per batch element, e.g. per run): sum first,
        # scale after
        mu, scale = mu_batch, scale_batch
        squares = _small_squares(loc, mu.reshape(mu.shape + (1,) * len(event)), ratio, event)
        n = math.prod(event)
        # the parts without M (a fixed p's entropy too) in one constant: one differentiable op
        constant = n * (scale.log() + (HALF_LOG_2PI - log_resolution)) - _fixed_entropy(q)
        kl = torch.addcdiv(constant, squares, 2.0 * scale * scale)
    else:
        second_moment = (loc - mu).pow(2) + ratio * loc.pow(2)
        per_weight = 0.5 * second_moment / scale.pow(2) + scale.log() + (HALF_LOG_2PI - log_resolution)
        kl = _sum_event(per_weight, event) - _fixed_entropy(q)
    if not q.is_point_mass and isinstance(q.p, torch.Tensor):
        kl = kl - q.num_units * bernoulli_entropy(_compact(q.p))
    return kl if kl.shape == q.batch_shape else kl.expand(q.batch_shape)


def _fixed_entropy(q: MaskedWeight) -> float:
    r"""The masks' entropy term :math:`K\,\mathcal{H}(p)` of a fixed (float) ``p``, else 0."""
    if q.is_point_mass or isinstance(q.p, torch.Tensor):
        return 0.0
    return q.num_units * _entropy_of_float(q.p)


def _entropy_of_float(p: float) -> float:
    return -(p * math.log(p) + (1 - p) * math.log1p(-p)) if 0 < p < 1 else 0.0


def _gaussian_parts(prior: Distribution, q: MaskedWeight) -> tuple[torch.Tensor, torch.Tensor, float]:
    """Unwrap ``Independent`` layers of a (quantised) Gaussian prior; check the event dims."""
    reinterpreted = 0
    base = prior
    while isinstance(base, Independent):
        reinterpreted += base.reinterpreted_batch_ndims
        base = base.base_dist
    if isinstance(base, QuantisedGaussian):
        log_resolution = base.log_resolution
    elif isinstance(base, Normal):
        log_resolution = 0.0
    else:
        raise NotImplementedError(
            f"no analytic KL between {type(q).__name__} and a {type(base).__name__} prior "
            "(supported priors: QuantisedGaussian, Normal, optionally .to_event(...))"
        )
    if reinterpreted > q.event_dim:
        raise NotImplementedError(
            f"{type(q).__name__} has {q.event_dim} event dims but its prior has {reinterpreted}"
        )
    return base.loc, base.scale, log_resolution


def _single(t: torch.Tensor) -> torch.Tensor | None:
    """``t`` as one number where every element is the same (by stride-0 expansion), else None."""
    t = _compact(t)
    return t.reshape(()) if t.numel() == 1 else None


def kl_terms(q: MaskedWeight, prior: Distribution) -> tuple[Any, ...] | None:
    r"""The KL of the module docstring for a site with a fixed (float) ``p`` and one prior mean
    :math:`\mu` and scale :math:`s` for all its weights, as terms linear in the moments of the means
    :math:`M` (the same means for every copy of the site):

    $$
    \mathrm{KL} = c\,\Big[\frac{\lVert M\rVert^2/(1-p) - 2\mu\textstyle\sum M + n\mu^2}{2s^2}
    + n \log s\Big] + C,
    \qquad C = c\,\big[n(\tfrac12\log 2\pi - \log\delta) - K\,\mathcal{H}(p)\big],
    $$

    returned as ``(M, mu, s, c, 1 / (1 - p), n, C)`` (``c``: the copies, the site's batch size; ``n``:
    the weights of one copy), or None where the site has a learned ``p``, a prior of values of its
    own per weight, or means of their own per copy (:func:`kl_masked_gaussian` then). No tensor's
    value is read: a recorded graph keeps these as its operations."""
    if isinstance(q.p, torch.Tensor):
        return None
    try:
        prior_loc, prior_scale, log_resolution = _gaussian_parts(prior, q)
    except NotImplementedError:
        return None
    loc, scale, means = _single(prior_loc), _single(prior_scale), q.loc
    if loc is None or scale is None:
        return None
    if any(means.shape[d] > 1 and means.stride(d) != 0 for d in range(means.dim() - q.event_dim)):
        return None  # means of their own per copy (per particle, per run)
    p, n, copies = float(q.p), math.prod(q.event_shape), math.prod(q.batch_shape)
    constant = copies * (n * (HALF_LOG_2PI - log_resolution)) - copies * _fixed_entropy(q)
    if means.shape != q.event_shape:  # batch dims of size 1 or stride 0: one copy of the means
        means = means.reshape(-1, *q.event_shape)[0]
    return means, loc, scale, copies, 1.0 / (1.0 - p), n, constant


def _kl_masked_prior(q: MaskedWeight, prior: Distribution) -> torch.Tensor:
    loc, scale, log_resolution = _gaussian_parts(prior, q)
    return kl_masked_gaussian(q, loc, scale, log_resolution)


# The same analytic KL for each masked family against each form the Gaussian prior takes
# (``register_kl`` takes one registration per pair of types).
for _q_type in (BernoulliDropout, ConcreteDropout, NetworkDropout):
    for _p_type in (QuantisedGaussian, Normal, Independent):
        register_kl(_q_type, _p_type)(_kl_masked_prior)
del _q_type, _p_type
