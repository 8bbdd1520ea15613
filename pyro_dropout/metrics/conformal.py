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
    if torch.isnan(scores).any():
        raise ValueError(f"conformal_quantile: {int(torch.isnan(scores).sum())} of the {n} scores are NaN")
    rank = math.ceil((n + 1) * (1 - alpha))
    if rank > n:
        return torch.tensor(float("inf"), dtype=scores.dtype, device=scores.device)
    return scores.flatten().sort().values[rank - 1]


def _check_finite(where: str, value: torch.Tensor) -> None:
    bad = ~torch.isfinite(value)
    if bad.any():
        raise ValueError(f"{where}: {int(bad.sum())} of its {value.numel()} values are NaN or infinite")


def _mean_sd(pred: Any, site: str | None, where: str, positive: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """The predictive mean and sd ``[N]`` of a Predictions object, or a ``(mean, sd)`` pair, each
    checked: finite, one value per point, and the sds positive (``positive``) or at least 0."""
    if isinstance(pred, tuple):
        if len(pred) != 2:
            raise ValueError(f"conformal_interval: {where} is a tuple of {len(pred)}; give (mean, sd)")
        mean, sd = (torch.as_tensor(t) for t in pred)
        mean, sd = (t if t.is_floating_point() else t.to(torch.get_default_dtype()) for t in (mean, sd))
    else:
        mean, sd = _predictive_mean_sd(pred, site)
    if mean.dim() != 1 or sd.shape != mean.shape:
        raise ValueError(
            f"conformal_interval: {where}'s mean and sd must be [N] each, got {tuple(mean.shape)} and "
            f"{tuple(sd.shape)}"
        )
    _check_finite(f"conformal_interval: {where}'s mean", mean)
    _check_finite(f"conformal_interval: {where}'s sd", sd)
    low = sd.min() if sd.numel() else torch.tensor(1.0)
    if low < 0 or (positive and low == 0):
        need = (
            "positive (normalised=True divides by it; normalised=False: a constant width)"
            if positive
            else ">= 0"
        )
        raise ValueError(f"conformal_interval: {where}'s sd must be {need}, got {float(low):.3g}")
    return mean, sd


def _predictive_mean_sd(pred: Any, site: str | None) -> tuple[torch.Tensor, torch.Tensor]:
    if not hasattr(pred, "means"):
        raise TypeError(
            f"conformal_interval: expected Predictions or a (mean, sd) pair, got {type(pred).__name__}"
        )
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
    mean, sd = _mean_sd(calibration, site, "calibration", normalised)
    y = torch.as_tensor(y_calibration, dtype=mean.dtype, device=mean.device)
    if y.numel() != mean.numel():
        raise ValueError(f"y_calibration: expected {mean.numel()} targets, got {tuple(y.shape)}")
    y = y.reshape(mean.shape)
    _check_finite("conformal_interval: y_calibration", y)
    width = sd if normalised else torch.ones_like(sd)
    q = conformal_quantile((y - mean).abs() / width, alpha)
    mean_t, sd_t = _mean_sd(test, site, "test", False)
    half = q * (sd_t if normalised else torch.ones_like(sd_t))
    return mean_t - half, mean_t + half


def _probs(p: Any, site: str | None, where: str) -> torch.Tensor:
    """Mean class probabilities ``[N, C]`` from Predictions, draws ``[T, N, C]`` or ``[N, C]``,
    checked to be probabilities (finite, in [0, 1], each row summing to 1: not logits)."""
    if hasattr(p, "probs"):
        if not p.probs:
            raise ValueError(
                f"conformal_set: the {where} predictions have no class probabilities (a regression "
                "model?): use conformal_interval"
            )
        p = p.probs[site or next(iter(p.probs))]
    p = torch.as_tensor(p)
    if p.dim() not in (2, 3):
        raise ValueError(
            f"conformal_set: {where} must be [N, C] or [T, N, C] probabilities, got {tuple(p.shape)}"
        )
    p = p.mean(0) if p.dim() == 3 else p
    _check_finite(f"conformal_set: {where}'s probabilities", p)
    if p.numel() and (
        p.min() < 0 or p.max() > 1 or not torch.allclose(p.sum(-1), torch.ones(()).to(p), atol=1e-3)
    ):
        raise ValueError(
            f"conformal_set: {where} holds values outside [0, 1] or rows that do not sum to 1 (logits?): "
            "give probabilities (logits.softmax(-1))"
        )
    return p


def _check_labels(labels: Any, probs: torch.Tensor) -> torch.Tensor:
    """``y_calibration`` as ``[N, 1]`` class indices: whole numbers in ``0..C-1``, one per point."""
    y = torch.as_tensor(labels, device=probs.device)
    classes, n = probs.shape[-1], probs.shape[0]
    if n == 0:
        raise ValueError("conformal prediction needs calibration points; got none")
    whole = not y.is_floating_point() or bool((torch.isfinite(y) & (y == y.round())).all())
    if y.numel() != n or not whole or y.min() < 0 or y.max() >= classes:
        raise ValueError(f"y_calibration: expected {n} whole-number labels in 0..{classes - 1}")
    return y.long().reshape(-1, 1)


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
    if isinstance(lam, bool) or not isinstance(lam, int | float) or not math.isfinite(lam) or lam < 0:
        raise ValueError(f"conformal_set: lam must be a finite number >= 0, got {lam!r}")
    if isinstance(k_reg, bool) or not isinstance(k_reg, int) or k_reg < 0:
        raise ValueError(f"conformal_set: k_reg must be a whole number >= 0, got {k_reg!r}")
    lam = lam if method == "raps" else 0.0
    probs, probs_t = _probs(calibration, site, "calibration"), _probs(test, site, "test")
    if probs.shape[-1] != probs_t.shape[-1]:
        raise ValueError(
            f"conformal_set: the calibration predictions have {probs.shape[-1]} classes, the test "
            f"predictions {probs_t.shape[-1]}"
        )
    labels = _check_labels(y_calibration, probs)
    u = torch.rand(probs.shape[0], 1, generator=generator).to(probs)
    q = conformal_quantile(_aps_scores(probs, labels, u, lam, k_reg), alpha)
    every = torch.arange(probs_t.shape[-1], device=probs_t.device).expand(probs_t.shape[0], -1)
    u_t = torch.rand(probs_t.shape[0], 1, generator=generator).to(probs_t)
    return _aps_scores(probs_t, every, u_t, lam, k_reg) <= q
