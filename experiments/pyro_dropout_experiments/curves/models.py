r"""Paper 000's one-dimensional models on one training set: MC dropout with ReLU and with TanH at
p = 0.1 and 0.2, standard dropout (weight averaging), MC dropout with only 10 draws, and the GP."""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
import torch

from .fit import Predictive, fit_curves, gp_curve, mc_predictive, standard_predictive
from .settings import CurveSettings

__all__ = ["RATES", "curve", "fit_models", "scores"]

RATES = (0.1, 0.2)


def fit_models(
    t: np.ndarray, y: np.ndarray, points: np.ndarray, s: CurveSettings, what: str, progress: bool = True
) -> tuple[dict[str, Predictive], dict[str, float]]:
    """Each model trained on ``t``, ``y`` and predicting at ``points``: ``{name: Predictive}`` (one
    run each) and the seconds each training took. Names: ``relu-p0.1`` ... ``tanh-p0.2``,
    ``relu-p0.1-standard``, ``relu-p0.1-T10``, ``gp``."""
    curves: dict[str, Predictive] = {}
    seconds: dict[str, float] = {}
    for activation in ("relu", "tanh"):
        start = time.perf_counter()
        fitted = fit_curves(
            t, y, RATES, s, activation=activation, progress=progress, desc=f"{what} {activation}"
        )
        pred = mc_predictive(fitted, points, s.num_samples)
        seconds[activation] = time.perf_counter() - start
        for r, p in enumerate(RATES):
            curves[f"{activation}-p{p}"] = Predictive(pred.means[:, r : r + 1], pred.noise[:, r : r + 1])
        if activation == "relu":
            standard = standard_predictive(fitted, points)
            curves["relu-p0.1-standard"] = Predictive(standard.means[:, :1], standard.noise[:, :1])
            curves["relu-p0.1-T10"] = Predictive(pred.means[:10, :1], pred.noise[:10, :1])
    start = time.perf_counter()
    curves["gp"] = gp_curve(t, y, points, s.gp_steps)
    seconds["gp"] = time.perf_counter() - start
    return curves, seconds


def scores(pred: Predictive, y: np.ndarray, at: np.ndarray) -> dict[str, Any]:
    """RMSE and mean log-likelihood (Gaussian, the predictive's mean and sd) of readings ``y`` at
    the prediction points selected by ``at`` (a boolean mask)."""
    mean, sd = pred.mean[0].double().numpy()[at], pred.sd[0].double().numpy()[at]
    err = np.asarray(y, dtype=np.float64) - mean
    ll = -0.5 * np.log(2 * math.pi * sd**2) - 0.5 * (err / sd) ** 2
    return {"rmse": float(np.sqrt(np.mean(err**2))), "test_ll": float(np.mean(ll))}


def curve(pred: Predictive, on: np.ndarray) -> dict[str, list[float]]:
    """The predictive mean and sd at the prediction points selected by ``on``."""
    keep = torch.as_tensor(on)
    return {"mean": pred.mean[0][keep].tolist(), "sd": pred.sd[0][keep].tolist()}
