r"""The dropout KL of every weight and bias in closed form, once a step: over the sites,
:math:`\sum_s c_s \lVert M_s\rVert^2 + C` for zero prior means, one term more in :math:`\sum M_s` per site
for others (the per-site KL of docs/maths.md, "KL divergence", summed).
:func:`closed_form_kl` takes the sites it covers (one prior mean and scale per site, a fixed rate, no
scale or mask, the same means for every particle) and leaves the others to ``kl_divergence``, which
stays registered; it equals the per-site KL to float rounding (``tests/infer/test_penalty.py``).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch.distributions import Independent, Normal

from ..distributions import MaskedWeight, QuantisedGaussian

__all__ = ["closed_form_kl"]

_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def _single(t: torch.Tensor) -> torch.Tensor | None:
    """``t`` as one number where every element is the same (by stride-0 expansion), else None."""
    for dim, (size, stride) in enumerate(zip(t.shape, t.stride(), strict=True)):
        if size > 1 and stride == 0:
            t = t.narrow(dim, 0, 1)
    return t.reshape(()) if t.numel() == 1 else None


def _terms(q: Any, prior: Any, site: Any) -> tuple[Any, ...] | None:
    r"""``(M, mu, s, copies, 1 / (1 - p), n, constant)`` of one site's KL
    :math:`\text{copies}\,\big[(\lVert M\rVert^2/(1-p) - 2\mu\textstyle\sum M + n\mu^2)/(2s^2) + n\log s
    \big] + \text{constant}`, or None where the closed form does not cover it. No tensor's value
    is read: a recorded graph keeps these as its operations (and computes those of the prior once)."""
    plain = isinstance(site["scale"], int | float) and site["scale"] == 1.0 and site["mask"] is None
    if not (plain and isinstance(q, MaskedWeight) and not isinstance(q.p, torch.Tensor)):
        return None
    base, reinterpreted = prior, 0
    while isinstance(base, Independent):
        base, reinterpreted = base.base_dist, reinterpreted + base.reinterpreted_batch_ndims
    if not isinstance(base, QuantisedGaussian | Normal) or reinterpreted > q.event_dim:
        return None
    loc, scale, means = _single(base.loc), _single(base.scale), q.loc
    if (
        loc is None
        or scale is None
        or any(means.shape[d] > 1 and means.stride(d) != 0 for d in range(means.dim() - q.event_dim))
    ):  # a prior with values of its own per weight, or means of their own per particle
        return None
    p, n, copies = float(q.p), math.prod(q.event_shape), math.prod(q.batch_shape)
    entropy = -(p * math.log(p) + (1 - p) * math.log1p(-p)) if 0 < p < 1 else 0.0
    log_resolution = base.log_resolution if isinstance(base, QuantisedGaussian) else 0.0
    constant = copies * (n * (_HALF_LOG_2PI - log_resolution) - (q.num_units * entropy if p > 0 else 0.0))
    if means.shape != q.event_shape:  # batch dims of size 1 or stride 0: one copy of the means
        means = means.reshape(-1, *q.event_shape)[0]
    return means, loc, scale, copies, 1.0 / (1.0 - p), n, constant


def closed_form_kl(pairs: list[tuple[Any, Any, Any]]) -> tuple[torch.Tensor | None, list[int]]:
    """The KL of the sites of ``pairs`` (``(q, prior, guide site)``) the closed form covers, as one
    expression, and the indices of the pairs it leaves."""
    terms = [_terms(*pair) for pair in pairs]
    found, left = [t for t in terms if t is not None], [i for i, t in enumerate(terms) if t is None]
    if not found:
        return None, left
    means = [f[0] for f in found]
    moments = torch.stack([(m * m).sum() for m in means] + [m.sum() for m in means])
    dtype, device = moments.dtype, moments.device
    mu, s = (torch.stack([f[i] for f in found]).to(device=device, dtype=dtype) for i in (1, 2))
    copies, keep, n = (torch.tensor([f[i] for f in found], dtype=dtype, device=device) for i in (3, 4, 5))
    # E_q sum (w - mu)^2 = keep ||M||^2 - 2 mu sum M + n mu^2 by site: linear in the moments, with
    # coefficients of the priors alone (a recorded graph computes them once)
    weight = copies / (2 * s * s)
    coefficients = torch.cat([weight * keep, -2 * weight * mu])
    constant = (copies * n * (mu * mu / (2 * s * s) + s.log())).sum() + sum(f[6] for f in found)
    return torch.dot(coefficients, moments) + constant, left
