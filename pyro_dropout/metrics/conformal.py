r"""Split conformal prediction on the MC-dropout predictive: intervals and sets with a coverage
that holds in finite samples, whatever the posterior's calibration.

Given ``n`` calibration points exchangeable with the test points, a score :math:`s` (large when
the prediction is off) and :math:`\hat q` the :math:`\lceil (n+1)(1-\alpha) \rceil / n` empirical
quantile of the calibration scores, the set :math:`\{y : s(x, y) \le \hat q\}` contains the test
label with probability at least :math:`1 - \alpha` (Vovk et al. 2005; Angelopoulos & Bates 2023).

* :func:`conformal_interval` (regression): the score :math:`|y - \mu(x)| / \sigma(x)`, with the
  predictive mean and sd of the MC-dropout draws, so the interval :math:`\mu \pm \hat q \sigma`
  is wider where the network is less sure (``normalised=False``: :math:`|y - \mu|`, a constant
  width).
* :func:`conformal_set` (classification): APS, the probability mass of the classes ranked above
  the label plus a uniform share of its own (Romano, Sesia & Candès 2020), or RAPS, which adds
  :math:`\lambda (\mathrm{rank} - k_{reg})_+` to keep the sets small (Angelopoulos et al. 2021).
"""

from __future__ import annotations

import math
from typing import Any

import torch

__all__ = ["conformal_interval", "conformal_quantile", "conformal_set"]


def conformal_quantile(scores: torch.Tensor, alpha: float) -> torch.Tensor:
    r"""The :math:`\lceil (n+1)(1-\alpha) \rceil`-th smallest of ``n`` calibration scores (``inf``
    where there are too few for that level: every label is then in the set)."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be between 0 and 1 (the miscoverage), got {alpha!r}")
    n = scores.numel()
    if n == 0:
        raise ValueError("conformal prediction needs calibration points; got none")
    rank = math.ceil((n + 1) * (1 - alpha))
    if rank > n:
        return torch.tensor(float("inf"), dtype=scores.dtype, device=scores.device)
    return scores.flatten().sort().values[rank - 1]


def _mean_sd(pred: Any, site: str | None) -> tuple[torch.Tensor, torch.Tensor]:
    """The predictive mean and sd ``[N]`` of a Predictions object, or a ``(mean, sd)`` pair."""
    if isinstance(pred, tuple):
        mean, sd = pred
        return torch.as_tensor(mean), torch.as_tensor(sd)
    name = site or next((n for n in pred.means if n not in pred.probs), None)
    if name is None or name not in pred.means or name in pred.probs:
        raise ValueError(
            f"conformal_interval: no regression site {site or ''} in the predictions (its means)"
        )
    means, variances = pred.means[name], pred.variances[name]
    return means.mean(0), (means.var(0, unbiased=False) + variances.mean(0)).sqrt()


def conformal_interval(
    calibration: Any,
    y_calibration: torch.Tensor,
    test: Any,
    alpha: float = 0.1,
    *,
    site: str | None = None,
    normalised: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(lower, upper)`` ``[N_test]``: split-conformal intervals of level ``1 - alpha``.

    :param calibration: the predictive on the calibration points: :class:`Predictions` (of
        :func:`~pyro_dropout.prediction.predict`) or a pair ``(mean, sd)`` of ``[N_cal]`` tensors.
    :param y_calibration: their targets ``[N_cal]``.
    :param test: the predictive on the test points, in the same form.
    """
    mean, sd = _mean_sd(calibration, site)
    y = torch.as_tensor(y_calibration, dtype=mean.dtype, device=mean.device).reshape(mean.shape)
    width = sd.clamp_min(torch.finfo(sd.dtype).tiny) if normalised else torch.ones_like(sd)
    q = conformal_quantile((y - mean).abs() / width, alpha)
    mean_t, sd_t = _mean_sd(test, site)
    half = q * (sd_t if normalised else torch.ones_like(sd_t))
    return mean_t - half, mean_t + half


def _probs(p: Any, site: str | None) -> torch.Tensor:
    """Mean class probabilities ``[N, C]`` from Predictions, draws ``[T, N, C]`` or ``[N, C]``."""
    if hasattr(p, "probs"):
        name = site or next(iter(p.probs))
        p = p.probs[name]
    p = torch.as_tensor(p)
    return p.mean(0) if p.dim() == 3 else p


def _aps_scores(
    probs: torch.Tensor, labels: torch.Tensor, u: torch.Tensor, lam: float, k_reg: int
) -> torch.Tensor:
    """The (randomised, regularised) APS score of each label ``[N, L]`` for probabilities ``[N, C]``."""
    sorted_p, order = probs.sort(dim=-1, descending=True)
    ranks = order.argsort(dim=-1)  # the rank of each class, 0 = most probable
    above = sorted_p.cumsum(-1) - sorted_p  # the mass of the classes ranked above each rank
    rank = ranks.gather(-1, labels)
    own = probs.gather(-1, labels)
    penalty = lam * (rank + 1 - k_reg).clamp_min(0)
    return above.gather(-1, rank) + u * own + penalty


def conformal_set(
    calibration: Any,
    y_calibration: torch.Tensor,
    test: Any,
    alpha: float = 0.1,
    *,
    method: str = "aps",
    lam: float = 0.01,
    k_reg: int = 1,
    site: str | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """``[N_test, C]`` booleans: the classes in each test point's conformal set of level
    ``1 - alpha`` (``method="aps"`` or ``"raps"``, randomised as in the papers, so the coverage
    is exact in expectation). ``calibration`` and ``test``: :class:`Predictions`, draws
    ``[T, N, C]`` or mean probabilities ``[N, C]``."""
    if method not in ("aps", "raps"):
        raise ValueError(f"method must be 'aps' or 'raps', got {method!r}")
    lam = lam if method == "raps" else 0.0
    probs, probs_t = _probs(calibration, site), _probs(test, site)
    labels = torch.as_tensor(y_calibration, device=probs.device).long().reshape(-1, 1)
    if labels.shape[0] != probs.shape[0] or labels.min() < 0 or labels.max() >= probs.shape[-1]:
        raise ValueError(f"y_calibration: expected {probs.shape[0]} labels in 0..{probs.shape[-1] - 1}")
    u = torch.rand(probs.shape[0], 1, generator=generator).to(probs)
    q = conformal_quantile(_aps_scores(probs, labels, u, lam, k_reg), alpha)
    every = torch.arange(probs_t.shape[-1], device=probs_t.device).expand(probs_t.shape[0], -1)
    u_t = torch.rand(probs_t.shape[0], 1, generator=generator).to(probs_t)
    return _aps_scores(probs_t, every, u_t, lam, k_reg) <= q
