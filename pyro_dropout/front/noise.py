r"""The noise level of a regression front door, never a silent default.

``MCDropout(net, "regression")`` needs the noise precision :math:`\tau` of its likelihood
:math:`y \sim \mathcal N(f(x), \tau^{-1})` before it can predict: a network's trained weights say
nothing about it. It comes from one of three places, and the front door says which:

* **given**: ``tau=`` (the precision, ``1 / sd**2``), used as it is;
* **learned by fit**: ``bnn.fit`` learns it with the weights, its maximum-likelihood point under
  the dropout posterior (the ELBO's optimum: one over the mean squared residual of the draws);
* **held out**: ``bnn.calibrate(x_val, y_val)`` picks the :math:`\tau` that maximises the MC
  predictive log-likelihood of held-out points,
  :math:`\frac1N \sum_n \log \frac1T \sum_t \mathcal N(y_n \mid f_t(x_n), \tau^{-1})`, as the UCI
  protocol's grid search does (paper 000, §5.1), here by a search over :math:`\log \tau`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..ops import HALF_LOG_2PI

__all__ = ["NoiseLevel", "held_out_tau"]


@dataclass(frozen=True)
class NoiseLevel:
    """The likelihood's precision ``tau`` and where it came from (``None``: not known yet)."""

    tau: float | None
    source: str | None

    @property
    def sd(self) -> float | None:
        return None if self.tau is None else self.tau**-0.5

    def __str__(self) -> str:
        if self.tau is None:
            return "not known yet (give tau=, or call fit or calibrate)"
        return f"tau = {self.tau:.4g} (noise sd {self.sd:.4g}), {self.source}"


def _mean_log_likelihood(log_tau: torch.Tensor, squares: torch.Tensor) -> torch.Tensor:
    """The MC predictive log-likelihood per point at each ``log_tau`` ``[K]`` of the squared
    residuals ``squares`` ``[T, N]``: ``[K]``."""
    t = log_tau.reshape(-1, 1, 1)
    per_draw = 0.5 * t - HALF_LOG_2PI - 0.5 * t.exp() * squares
    return (torch.logsumexp(per_draw, dim=1) - math.log(squares.shape[0])).mean(-1)


def held_out_tau(means: torch.Tensor, y: torch.Tensor) -> float:
    """The precision that maximises the MC predictive log-likelihood of ``y`` ``[N]`` under the
    draws' means ``means`` ``[T, N]``: a grid of 801 points over 17 decades of ``tau`` around one
    over the mean squared residual, then a golden-section search between the best point's
    neighbours (to 1e-9 in ``log tau``)."""
    squares = (means.detach().double() - y.detach().double()) ** 2
    mean_square = float(squares.mean())
    if not math.isfinite(mean_square):
        raise ValueError("calibrate: the predictions or targets hold NaN or infinite values")
    if mean_square == 0.0:
        raise ValueError("calibrate: every draw predicts every target exactly; no noise level fits them")
    centre = -math.log(mean_square)
    grid = torch.linspace(centre - 4 * math.log(10), centre + 13 * math.log(10), 801, dtype=torch.float64)
    best = int(_mean_log_likelihood(grid, squares).argmax())
    lo, hi = float(grid[max(best - 1, 0)]), float(grid[min(best + 1, len(grid) - 1)])
    ratio = (math.sqrt(5) - 1) / 2
    while hi - lo > 1e-9:
        a, b = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
        fa, fb = _mean_log_likelihood(torch.tensor([a, b], dtype=torch.float64), squares).tolist()
        lo, hi = (lo, b) if fa >= fb else (a, hi)
    return math.exp((lo + hi) / 2)
