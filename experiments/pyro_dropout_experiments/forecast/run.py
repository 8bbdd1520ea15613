"""``pyro-dropout forecast``: an LSTM with variational dropout (masks tied over time) forecasting
the Mauna Loa CO2 series ten years past its training end; the band of the function draws widens
with the horizon. Writes ``results.json`` and ``forecast.png``."""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pyro
import torch

from pyro_dropout.export import pyplot
from pyro_dropout.guides import DropoutGuide
from pyro_dropout.infer import DropoutELBO
from pyro_dropout.prediction import predict

from ..core import held_out_tau, open_results, save_figure, save_results
from ..mnist.training import train_classifier
from .data import Increments, co2_increments
from .model import Forecaster
from .rollout import draw_trajectories, forecast_scores
from .settings import ForecastSettings

__all__ = ["run_forecast"]


def _figure(data: Increments, times: np.ndarray, draws: torch.Tensor, path: Path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9, 4))
    shown = data.t >= times[0] - 8
    ax.plot(data.t[shown & data.train], data.level[shown & data.train], "k-", lw=1, label="training readings")
    ax.plot(data.t[~data.train], data.level[~data.train], "r-", lw=1, label="readings after the training end")
    mean, sd = draws.mean(0).cpu().numpy(), draws.std(0).cpu().numpy()
    for k in (2, 1):
        ax.fill_between(times, mean - k * sd, mean + k * sd, color="C0", alpha=0.2, lw=0)
    for row in draws[:5].cpu().numpy():
        ax.plot(times, row, "-", color="C0", lw=0.4, alpha=0.7)
    ax.plot(times, mean, "C0-", lw=1.5, label="forecast mean, ±1 and ±2 sd, five draws")
    ax.set(xlabel="year", ylabel="CO2 (ppm)")
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)


def _held_out_tau(model: Any, guide: Any, data: Increments, draws: int, start: float) -> float:
    """The noise precision that maximises the held-out windows' one-step predictive likelihood
    (the MAP value is a fit to the training windows that still drifts after thousands of steps);
    the MAP value when no window is held out."""
    if len(data.val_x) == 0:
        return start
    means = predict(model, guide, data.val_x, num_samples=draws, return_sites=["mean"]).samples["mean"]
    return float(held_out_tau(means[:, None, :].double(), data.val_y[None].double(), torch.tensor([start])))


def run_forecast(
    s: ForecastSettings, out: str | Path, data_dir: str | Path | None = None, progress: bool = True
) -> dict[str, Any]:
    """Train the forecaster on the windows before ``s.train_end`` and draw ``s.num_samples``
    trajectories ``s.horizon`` steps ahead; scores on the readings there are."""
    out = Path(out)
    open_results(out, asdict(s))  # another run's results are refused before any work
    data = co2_increments(s, data_dir)
    out.mkdir(parents=True, exist_ok=True)
    pyro.clear_param_store()
    pyro.set_rng_seed(s.seed)
    model = Forecaster(s.hidden, s.layers, s.dropout, s.length_scale)
    guide = DropoutGuide(model)
    start = time.perf_counter()
    epochs = s.steps / max(1, -(-len(data.x) // s.batch_size))
    loss = DropoutELBO(per_example_masks=True)  # each window its own masks, tied over its steps
    train_classifier(model, guide, (data.x, data.y), epochs=epochs, batch_size=s.batch_size, lr=s.lr,
                     loss=loss, seed=s.seed, progress=progress, desc="LSTM")  # fmt: skip
    tau_map = float(guide.median()["tau"])
    tau = _held_out_tau(model, guide, data, s.num_samples, tau_map)
    draws = draw_trajectories(model, guide, data, s.horizon, s.num_samples, tau)
    step = float(np.median(np.diff(data.t)))
    times = data.t[data.train][-1] + step * np.arange(1, s.horizon + 1)
    sd = draws.std(0).cpu().numpy()
    year = min(s.horizon, round(1 / step)) - 1
    results = {
        "settings": asdict(s),
        "seconds": round(time.perf_counter() - start, 1),
        "times": times.tolist(),
        "mean": draws.mean(0).tolist(),
        "sd": sd.tolist(),
        "sd_one_year": float(sd[year]),
        "sd_end": float(sd[-1]),
        "scores": forecast_scores(draws, data.level[~data.train]),
        "tau_map": tau_map,
        "tau": tau,
    }
    save_results(out, results)
    _figure(data, times, draws, out / "forecast.png")
    return results
