r"""``pyro-dropout solar``: paper 000 appendix D.1, interpolation on the reconstructed solar
irradiance (Lean 2004), yearly 1610-2000.

The appendix's gaps are not in the paper's text, so these are this library's: five gaps of 25
years each, spread over the series' interior (``SOLAR_GAPS``); the models train on the other
266 years and predict every year, gaps included.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from pyro_dropout.datasets import load_solar

from ..core import open_results
from .figures import save_panels, write_results
from .models import curve, fit_models, scores
from .settings import CurveSettings

__all__ = ["SOLAR_GAPS", "run_solar", "solar_data"]

SOLAR_GAPS = ((1660.0, 1684.0), (1730.0, 1754.0), (1800.0, 1824.0), (1870.0, 1894.0), (1940.0, 1964.0))


def solar_data(data_dir: str | Path | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Years, irradiance and the training mask (the years outside ``SOLAR_GAPS``)."""
    series = load_solar(data_dir)
    in_gap = np.zeros(len(series.t), dtype=bool)
    for lo, hi in SOLAR_GAPS:
        in_gap |= (series.t >= lo) & (series.t <= hi)
    return series.t, series.y, ~in_gap


def run_solar(
    s: CurveSettings, out: Path, data_dir: str | Path | None = None, progress: bool = True
) -> dict[str, Any]:
    """Fit every model on the years outside the gaps; write ``results.json`` (per model: mean and
    sd each year, sd inside the gaps and outside them and their ratio, RMSE and test
    log-likelihood in the gaps) and ``solar.png``; return the results."""
    open_results(out, asdict(s))  # another run's results are refused before any work
    t, y, train = solar_data(data_dir)
    curves, seconds = fit_models(t[train], y[train], t, s, "solar", progress)
    models = {}
    for name, pred in curves.items():
        sd = pred.sd[0].numpy()
        inside, outside = float(sd[~train].mean()), float(sd[train].mean())
        models[name] = {
            **curve(pred, np.ones(len(t), dtype=bool)),
            "sd_gaps": inside,
            "sd_outside": outside,
            "sd_ratio": inside / outside,
            "gaps": scores(pred, y[~train], ~train),
        }
    results = {
        "data": {
            "gaps": [list(g) for g in SOLAR_GAPS],
            "train": int(train.sum()),
            "test": int((~train).sum()),
        },
        "grid": t.tolist(),
        "models": models,
        "seconds": seconds,
        "settings": asdict(s),
    }
    return write_results(out, results, lambda r, path: solar_figure(r, t, y, path), "solar.png")


def solar_figure(results: dict[str, Any], t: np.ndarray, y: np.ndarray, path: Path) -> Path:
    """One panel per model: the held-out gaps shaded grey, ±2 sd in shades of half an sd."""
    names = ("gp", "relu-p0.1", "relu-p0.2", "tanh-p0.1", "tanh-p0.2", "relu-p0.1-standard")
    panels = [
        {
            "t": t,
            "y": y,
            "grid": np.asarray(results["grid"]),
            "mean": results["models"][name]["mean"],
            "sd": results["models"][name]["sd"],
            "title": name,
            "gaps": results["data"]["gaps"],
        }
        for name in names
        if name in results["models"]
    ]
    return save_panels(path, panels)
