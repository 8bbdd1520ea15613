r"""The dropout KL of every weight and bias in one expression, once a step: over the sites,
:math:`\sum_s c_s \lVert M_s\rVert^2 + C` for zero prior means, one term more in :math:`\sum M_s` per site
for others. Each site's terms come from :func:`~pyro_dropout.distributions.kl.kl_terms`, the
one source of the KL's formula beside the registered ``kl_divergence``; :func:`closed_form_kl` adds
the sites those terms cover (one prior mean and scale per site, a fixed rate, no scale or mask, the
same means for every particle) and leaves the others to ``kl_divergence``. It equals the per-site
KL to float rounding (``tests/infer/test_penalty.py``).
"""

from __future__ import annotations

from typing import Any

import torch

from ..distributions import MaskedWeight, kl_terms

__all__ = ["closed_form_kl"]


def _terms(q: Any, prior: Any, site: Any) -> tuple[Any, ...] | None:
    """The site's KL terms (:func:`~pyro_dropout.distributions.kl.kl_terms`), where the site is a
    plain one (no scale, no mask) of a dropout family the terms cover; else None."""
    plain = isinstance(site["scale"], int | float) and site["scale"] == 1.0 and site["mask"] is None
    return kl_terms(q, prior) if plain and isinstance(q, MaskedWeight) else None


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
