"""The CO2 increments the forecaster learns: every k-th weekly reading, differenced (the
increments have no trend for the network to extrapolate), standardised on the training part, and
cut into windows of past increments with the next one as the target."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from pyro_dropout.datasets import load_co2

from .settings import ForecastSettings

__all__ = ["Increments", "co2_increments"]


@dataclass
class Increments:
    """Standardised increments ``z`` at times ``t`` (``train``: before the training end), their
    scale (``y = level[0] + cumsum(z * sd + mu)``), the levels, the training windows and the
    latest windows before the training end, held out (the network does not train on them)."""

    t: np.ndarray
    level: np.ndarray
    z: np.ndarray
    train: np.ndarray
    mu: float
    sd: float
    x: torch.Tensor  # [windows, window, 1]: the training windows
    y: torch.Tensor  # [windows]
    val_x: torch.Tensor  # the latest windows before the training end, held out
    val_y: torch.Tensor


def co2_increments(s: ForecastSettings, data_dir: str | Path | None = None) -> Increments:
    series = load_co2(data_dir)
    t, level = series.t[:: s.every], series.y[:: s.every]
    d, t_d = np.diff(level), t[1:]
    train = t_d < s.train_end
    if train.sum() <= s.window + 1:
        raise ValueError(
            f"forecast: {int(train.sum())} increments (of every {s.every}-th reading) before --train-end "
            f"{s.train_end} leave no training window of {s.window}; lower --window or --every, or raise "
            "--train-end"
        )
    if train.all():
        raise ValueError(
            f"forecast: --train-end {s.train_end} leaves no readings to forecast (the data end at "
            f"{t_d[-1]:.1f}); lower it"
        )
    mu, sd = float(d[train].mean()), float(d[train].std())
    z = (d - mu) / sd
    history = z[train]
    rows = np.stack([history[i - s.window : i] for i in range(s.window, len(history))])
    x = torch.tensor(rows, dtype=torch.float32).unsqueeze(-1)
    y = torch.tensor(history[s.window :], dtype=torch.float32)
    held = max(1, round(s.validation * len(x))) if s.validation > 0 else 0
    if held >= len(x):
        raise ValueError(f"forecast: --validation {s.validation} leaves no training window of {len(x)}")
    cut = len(x) - held
    return Increments(t_d, level[1:], z, train, mu, sd, x[:cut], y[:cut], x[cut:], y[cut:])
