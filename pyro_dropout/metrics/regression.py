r"""Scores of the MC-dropout regression predictive: a mixture of Gaussians.

With ``T`` function draws :math:`\hat y_t(x)` and aleatoric variances :math:`v_t(x)` (``1/τ``
for a homoscedastic model), the predictive is :math:`\frac1T\sum_t \mathcal{N}(\hat y_t, v_t)`.
Everything below is computed for that mixture exactly (no moment matching), except CRPS's
pair term for large ``T``, which is estimated without bias from random pairs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from ..ops import check_seed
from ._checks import as_tensor, check_draws, check_finite

__all__ = [
    "abs_normal_mean",
    "coverage",
    "crps",
    "gaussian_log_likelihood",
    "miscalibration_area",
    "miscalibration_area_from_pit",
    "pit",
    "rmse",
]

_SQRT2 = math.sqrt(2.0)


def _inputs(
    means: object, y: object, variance: object, min_draws: int = 1, what: str = "variance"
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    mu = check_draws(means, "means", min_draws)
    target = check_finite(as_tensor(y, "y"), "y").to(mu.dtype)
    if target.shape != mu.shape[1:]:
        raise ValueError(
            f"y has shape {tuple(target.shape)} but the draws have shape {tuple(mu.shape)} "
            f"(expected y of shape {tuple(mu.shape[1:])})"
        )
    var = check_finite(as_tensor(variance, what), what).to(mu.dtype)
    if bool((var <= 0).any()):
        raise ValueError(f"{what} must be positive")
    try:
        var = var.expand_as(mu)
    except RuntimeError as e:
        raise ValueError(f"{what} of shape {tuple(var.shape)} does not broadcast to {tuple(mu.shape)}") from e
    return mu, target, var


def gaussian_log_likelihood(samples: object, y: object, tau: object) -> torch.Tensor:
    r"""Test log-likelihood per point, paper [1] eq. 13, by log-sum-exp over the draws.

    $$
    \log p(y^* \mid x^*) \approx \operatorname{logsumexp}_t\big(-\tfrac{\tau}{2}
    \lVert y - \hat y_t\rVert^2\big) - \log T - \tfrac{D}{2}\log 2\pi + \tfrac{D}{2}\log\tau
    $$

    :param samples: function draws ``[T, N]`` (or ``[T, N, D]`` for ``D`` outputs).
    :param y: targets ``[N]`` (or ``[N, D]``).
    :param tau: model precision, a scalar or a tensor broadcasting to ``samples`` (one per
        draw, or heteroscedastic); with a varying ``tau`` this is the exact mixture density.
    :returns: ``[N]``.
    """
    mu, target, precision = _inputs(samples, y, tau, what="tau")
    squared = (target - mu).pow(2)
    log_norm = 0.5 * (precision.log() - math.log(2 * math.pi))
    per_draw = -0.5 * precision * squared + log_norm
    if mu.dim() == 3:
        per_draw = per_draw.sum(-1)
    return torch.logsumexp(per_draw, 0) - math.log(mu.shape[0])


def rmse(mean: object, y: object) -> float:
    """Root mean squared error of a point prediction ``[N]`` (e.g. the MC mean)."""
    m = check_finite(as_tensor(mean, "mean"), "mean")
    target = check_finite(as_tensor(y, "y"), "y").to(m.dtype)
    if m.shape != target.shape:
        raise ValueError(f"mean has shape {tuple(m.shape)} but y has shape {tuple(target.shape)}")
    if m.numel() == 0:
        raise ValueError("rmse: no points: a score of nothing is undefined")
    return float((m - target).pow(2).mean().sqrt())


def pit(means: object, y: object, variance: object) -> torch.Tensor:
    r"""The probability integral transform of the mixture predictive, per point.

    :math:`F(y_n) = \frac1T\sum_t \Phi\big((y_n-\hat y_t)/\sqrt{v_t}\big)`; uniform on [0, 1]
    when the predictive is calibrated.
    """
    mu, target, var = _inputs(means, y, variance)
    z = (target - mu) / var.sqrt()
    return (0.5 * (1 + torch.erf(z / _SQRT2))).mean(0)


def coverage(
    means: object, y: object, variance: object, levels: Sequence[float] = (0.5, 0.8, 0.9, 0.95)
) -> dict[float, float]:
    r"""Share of targets inside the central predictive interval of each level.

    :math:`y` lies in the central interval of level :math:`c` iff :math:`|F(y) - \tfrac12| \le c/2`.
    A calibrated predictive covers a share :math:`c`.
    """
    u = pit(means, y, variance)
    out = {}
    for level in levels:
        if not 0 < level < 1:
            raise ValueError(f"coverage levels must lie in (0, 1), got {level}")
        out[float(level)] = float(((u - 0.5).abs() <= level / 2).double().mean())
    return out


def miscalibration_area(means: object, y: object, variance: object) -> float:
    r""":math:`\int_0^1 |\hat c(c) - c|\,dc`, the observed against the nominal coverage of central intervals.

    Computed exactly from the PIT values: :math:`\hat c(c)` is the empirical CDF of
    :math:`d_n = 2|F(y_n) - \tfrac12|`, piecewise constant between the sorted :math:`d_n`.
    """
    return miscalibration_area_from_pit(pit(means, y, variance))


def miscalibration_area_from_pit(u: torch.Tensor) -> float:
    """:func:`miscalibration_area` from the PIT values ``u`` ``[N]`` of the points (``[N, D]``:
    every output of every point)."""
    d = torch.sort(2 * (u.double().reshape(-1) - 0.5).abs()).values
    n = d.numel()
    knots = torch.cat([d.new_zeros(1), d, d.new_ones(1)])
    a, b = knots[:-1], knots[1:]
    h = torch.arange(n + 1, dtype=torch.float64, device=d.device) / n  # coverage on [a, b)
    below = 0.5 * ((b - h).pow(2) - (a - h).pow(2))  # h <= a
    above = 0.5 * ((h - a).pow(2) - (h - b).pow(2))  # h >= b
    across = 0.5 * ((h - a).pow(2) + (b - h).pow(2))  # a < h < b
    area = torch.where(h <= a, below, torch.where(h >= b, above, across))
    return float(area.sum())


def abs_normal_mean(m: torch.Tensor, var: torch.Tensor) -> torch.Tensor:
    r""":math:`\mathbb{E}|Z|` for :math:`Z \sim \mathcal{N}(m, \text{var})`."""
    s = var.sqrt()
    z = m / s
    pdf = torch.exp(-0.5 * z.pow(2)) / math.sqrt(2 * math.pi)
    cdf = 0.5 * (1 + torch.erf(z / _SQRT2))
    return 2 * s * pdf + m * (2 * cdf - 1)


def crps(
    means: object,
    y: object,
    variance: object,
    max_exact_draws: int = 1000,
    num_pairs: int = 100_000,
    seed: int = 0,
) -> torch.Tensor:
    r"""Continuous ranked probability score of the Gaussian-mixture predictive, per point.

    :math:`\mathrm{CRPS} = \mathbb{E}|X - y| - \tfrac12\mathbb{E}|X - X'|` with :math:`X, X'`
    independent draws from the mixture, both terms in closed form for Gaussians. The pair
    term sums over all :math:`T^2` pairs when ``T <= max_exact_draws`` (in chunks of points,
    so memory stays bounded); beyond that it is estimated without bias from about
    ``num_pairs`` random pairs of distinct draws per point (seeded; standard error about
    ``sd / sqrt(num_pairs)`` of the pair term), plus the exact same-draw terms. Lower is better.
    """
    mu, target, var = _inputs(means, y, variance)
    t = mu.shape[0]
    first = abs_normal_mean(target - mu, var).mean(0)
    if t <= max_exact_draws:
        flat_mu, flat_var = mu.reshape(t, -1), var.reshape(t, -1)
        step = max(1, 2**22 // (t * t))
        pair = torch.cat(
            [
                abs_normal_mean(
                    flat_mu[:, i : i + step].unsqueeze(0) - flat_mu[:, i : i + step].unsqueeze(1),
                    flat_var[:, i : i + step].unsqueeze(0) + flat_var[:, i : i + step].unsqueeze(1),
                ).mean((0, 1))
                for i in range(0, flat_mu.shape[1], step)
            ]
        )
        return first - 0.5 * pair.reshape(first.shape)
    same = abs_normal_mean(torch.zeros_like(mu), 2 * var).mean(0)
    g = torch.Generator().manual_seed(check_seed(seed, "crps"))
    rounds = max(1, math.ceil(num_pairs / t))
    total = torch.zeros_like(first)
    for _ in range(rounds):
        perm = torch.randperm(t, generator=g).to(mu.device)
        a, b = perm, perm.roll(1)
        total += abs_normal_mean(mu[a] - mu[b], var[a] + var[b]).mean(0)
    distinct = total / rounds
    pair = same / t + (t - 1) / t * distinct
    return first - 0.5 * pair
