"""Forecasts as function draws: each draw of the weights (one dropout mask for the whole
trajectory, as the model is one function) runs the series forward step by step, feeding back its
own increments with their noise, so the band widens with the horizon."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyro
import torch
from pyro import poutine

from pyro_dropout.prediction import DRAWS_PLATE

from .data import Increments

__all__ = ["draw_trajectories", "forecast_scores"]


def draw_trajectories(
    model: Any, guide: Any, data: Increments, horizon: int, num_samples: int, tau: float
) -> torch.Tensor:
    """``[T, horizon]`` levels after the training end, one row per function draw, each step's
    increment drawn with noise precision ``tau`` (standardised scale)."""
    window = torch.tensor(data.z[data.train][-data.x.shape[1] :], dtype=torch.float32)
    window = window.reshape(1, 1, -1, 1).expand(num_samples, 1, -1, 1)
    with torch.no_grad(), poutine.block(), pyro.plate(DRAWS_PLATE, num_samples, dim=-2):
        latents = poutine.trace(guide).get_trace(window[0], torch.zeros(1))
        mean_of = poutine.replay(model.mean, trace=latents)
        steps = []
        for _ in range(horizon):
            mean = mean_of(window).reshape(num_samples, 1)
            step = mean + torch.randn_like(mean) / tau**0.5
            steps.append(step[:, 0])
            window = torch.cat([window[:, :, 1:], step.reshape(num_samples, 1, 1, 1)], dim=2)
    increments = torch.stack(steps, dim=1).double() * data.sd + data.mu
    start = float(data.level[data.train][-1])
    return start + increments.cumsum(dim=1)


def forecast_scores(trajectories: torch.Tensor, actual: np.ndarray) -> dict[str, float]:
    """RMSE of the mean, the Gaussian (moment-matched) log-likelihood per reading and the share of
    readings inside the central 95% of the draws, on the ``len(actual)`` readings there are."""
    n = min(len(actual), trajectories.shape[1])
    draws, y = trajectories[:, :n], torch.as_tensor(actual[:n], dtype=torch.float64)
    mean, sd = draws.mean(0), draws.std(0)
    low, high = draws.quantile(0.025, dim=0), draws.quantile(0.975, dim=0)
    return {
        "rmse": float(((mean - y) ** 2).mean().sqrt()),
        "test_ll": float(torch.distributions.Normal(mean, sd).log_prob(y).mean()),
        "coverage_95": float(((y >= low) & (y <= high)).double().mean()),
        "readings": n,
    }
