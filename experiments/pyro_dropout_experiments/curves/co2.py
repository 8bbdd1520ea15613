r"""``pyro-dropout co2``: paper 000 §5.1, Figs. 2-3, extrapolation on Mauna Loa CO2.

The subset: every 8th weekly reading of 1958-2001 (279 of the 2,225 readings; the paper's
"about 200 points" is the 207 before 1991, the training rows). The models see those and predict
on a grid from the first reading to as far past 1991 again as one and a half times the training
span (about 2040), so the end of the grid, :math:`x^*`, is far from every reading.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from pyro_dropout.datasets import load_co2

from ..core import open_results
from .figures import save_panels, write_results
from .models import curve, fit_models, scores
from .settings import CurveSettings

__all__ = ["CO2_EVERY", "CO2_TRAIN_END", "co2_data", "run_co2"]

CO2_EVERY = 8
CO2_TRAIN_END = 1991.0
GRID = 600


def co2_data(data_dir: str | Path | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The subset's times, readings and training mask (readings before ``CO2_TRAIN_END``)."""
    series = load_co2(data_dir)
    t, y = series.t[::CO2_EVERY], series.y[::CO2_EVERY]
    train = t < CO2_TRAIN_END
    if train.sum() < 2 or np.ptp(y[train]) == 0 or train.all():
        raise ValueError(
            f"{series.path}: the experiment needs readings that vary before {CO2_TRAIN_END:.0f} and "
            f"readings after it; every {CO2_EVERY}-th reading gives {int(train.sum())} before and "
            f"{int((~train).sum())} after"
        )
    return t, y, train


def _summary(pred: Any, grid: np.ndarray, inside: np.ndarray, far: np.ndarray, n: int) -> dict[str, Any]:
    on_grid = np.arange(len(grid) + n) < len(grid)
    sd = pred.sd[0].numpy()
    inside_sd, far_sd = float(sd[: len(grid)][inside].mean()), float(sd[: len(grid)][far].mean())
    return {**curve(pred, on_grid), "sd_inside": inside_sd, "sd_far": far_sd, "sd_ratio": far_sd / inside_sd}


def run_co2(
    s: CurveSettings, out: Path, data_dir: str | Path | None = None, progress: bool = True
) -> dict[str, Any]:
    """Fit every model of :func:`~pyro_dropout_experiments.curves.models.fit_models` on the
    training readings; write ``results.json`` (per model: mean and sd on the grid, sd inside the
    training range, far from it (the last tenth of the grid) and their ratio, RMSE and test
    log-likelihood on the readings after 1991) and ``co2.png``; return the results."""
    open_results(out, asdict(s))  # another run's results are refused before any work
    t, y, train = co2_data(data_dir)
    span = CO2_TRAIN_END - t.min()
    grid = np.linspace(t.min(), CO2_TRAIN_END + 1.5 * span, GRID)
    points = np.concatenate([grid, t[~train]])  # the grid, then the held-out readings
    curves, seconds = fit_models(t[train], y[train], points, s, "CO2", progress)
    inside, far = grid < CO2_TRAIN_END, grid >= grid[-1] - 0.1 * (grid[-1] - grid[0])
    held_out = np.arange(len(points)) >= len(grid)
    models = {
        name: {
            **_summary(pred, grid, inside, far, int((~train).sum())),
            "after_1991": scores(pred, y[~train], held_out),
        }
        for name, pred in curves.items()
    }
    results = {
        "data": {
            "every": CO2_EVERY,
            "train_end": CO2_TRAIN_END,
            "train": int(train.sum()),
            "test": int((~train).sum()),
        },
        "grid": grid.tolist(),
        "x_star": float(grid[-1]),
        "models": models,
        "seconds": seconds,
        "settings": asdict(s),
    }
    return write_results(out, results, lambda r, path: co2_figure(r, t, y, path), "co2.png")


TITLES = {
    "relu-p0.1-standard": "(a) standard dropout, ReLU (weight averaging)",
    "gp": "(b) GP, squared-exponential kernel",
    "relu-p0.1": "(c) MC dropout, ReLU, p = 0.1",
    "tanh-p0.1": "(d) MC dropout, TanH, p = 0.1",
    "relu-p0.2": "MC dropout, ReLU, p = 0.2",
    "tanh-p0.2": "MC dropout, TanH, p = 0.2",
    "relu-p0.1-T10": "Fig. 3: MC dropout, ReLU, p = 0.1, T = 10 draws",
}


def co2_figure(results: dict[str, Any], t: np.ndarray, y: np.ndarray, path: Path) -> Path:
    """Figs. 2-3's counterparts, one panel per model (±2 sd in shades of half an sd)."""
    grid = np.asarray(results["grid"])
    panels = [
        {
            "t": t,
            "y": y,
            "grid": grid,
            "mean": results["models"][name]["mean"],
            "sd": results["models"][name]["sd"],
            "title": title,
            "train_end": results["data"]["train_end"],
            "x_star": results["x_star"],
        }
        for name, title in TITLES.items()
        if name in results["models"]
    ]
    return save_panels(path, panels)
