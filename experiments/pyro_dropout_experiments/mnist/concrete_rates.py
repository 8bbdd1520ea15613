"""``pyro-dropout mnist concrete``: paper 001 §4.3, Figs. 5-6. The converged Concrete dropout
probability of every layer of an MLP with three hidden ReLU layers on MNIST, against the
training-set size (3x512) and against the width; and the test accuracy of the 3x512 network on
the largest size (paper: 98.6%). Prior length-scale ``l * sqrt(K_in)`` per layer with
``l = 1e-2`` (appendix D.1); Concrete masks on every weight layer, the input included, from
p = 0.1. Each run trains ``settings.epochs`` passes but at least ``min_steps`` steps (on few images
p converges slowly: 2,000 steps are 512 epochs of 1,000 images; the paper trains 500 epochs at
every size). Writes ``results.json`` (after each run) and ``concrete_rates.png``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyro
import torch

from pyro_dropout.export import pyplot
from pyro_dropout.guides import DropoutGuide
from pyro_dropout.metrics import accuracy
from pyro_dropout.nn import concrete_mlp
from pyro_dropout.prediction import predict

from ..core import open_results, save_figure, save_results
from .data import load_splits
from .settings import MnistSettings
from .training import train_classifier

__all__ = ["SIZES", "WIDTHS", "run_concrete_rates"]

SIZES = (1000, 5000, 10000, 25000, 50000)  # paper 001 Fig. 5's range (up to all of its training split)
WIDTHS = (128, 256, 512, 1024)  # Fig. 6: units per hidden layer
LENGTH_SCALE = 1e-2  # appendix D.1's l, the best of its grid
MIN_STEPS = 2000  # every run at least this many steps: 512 epochs of 1,000 images (the paper: 500)


def _fit(
    x: torch.Tensor, y: torch.Tensor, width: int, s: MnistSettings, min_steps: int, progress: bool, desc: str
) -> tuple:
    pyro.clear_param_store()
    model = concrete_mlp(width, 3, in_features=x.shape[-1], length_scale=LENGTH_SCALE)
    guide = DropoutGuide(model, concrete=True, init_dropout=0.1)
    epochs = max(s.epochs, min_steps * s.batch_size / len(x))  # p converges slowly on few images
    train_classifier(
        model,
        guide,
        (x, y),
        epochs=epochs,
        batch_size=s.batch_size,
        lr=s.lr,
        seed=s.seed,
        progress=progress,
        desc=desc,
    )
    rates = guide.dropout_rates()
    return model, guide, [float(rates[k]) for k in sorted(rates, key=_layer_order)]


def _layer_order(name: str) -> tuple[int, int]:
    return (1, 0) if name.startswith("output") else (0, int(name.split(".")[1]))


def _figure(results: dict[str, Any], path: Path) -> None:
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for what, ax, label in (
        ("rates", axes[0], "training set size"),
        ("widths", axes[1], "hidden units per layer"),
    ):
        keys = sorted(results[what], key=int)
        if not keys:
            continue
        values = [results[what][k] for k in keys]
        for layer in range(len(values[0])):
            name = "output layer" if layer == len(values[0]) - 1 else f"layer {layer + 1}"
            ax.plot([int(k) for k in keys], [v[layer] for v in values], "o-", label=name)
        ax.set(xscale="log", xlabel=label, ylabel="converged p", title=f"Concrete p against {label}")
        ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)


def run_concrete_rates(
    settings: MnistSettings,
    out: str | Path,
    *,
    sizes: tuple[int, ...] = SIZES,
    widths: tuple[int, ...] = WIDTHS,
    min_steps: int = MIN_STEPS,
    data_dir: str | Path | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    out = Path(out)
    key = {**vars(settings), "sizes": list(sizes), "widths": list(widths), "min_steps": min_steps}
    results = open_results(out, key, resume=True)  # a rerun with these settings skips finished runs
    for part, empty in (("rates", {}), ("widths", {}), ("accuracy", None)):
        results.setdefault(part, empty)
    splits = load_splits(data_dir, validation=settings.validation, seed=settings.seed)
    x, y = splits.train[0].flatten(1), splits.train[1]
    if max(sizes) > len(x):
        raise ValueError(f"--sizes: {max(sizes)} is more than the {len(x)} training images")
    out.mkdir(parents=True, exist_ok=True)  # once the data is there: a bad folder leaves nothing
    runs = [("rates", n, 512) for n in sizes] + [("widths", max(sizes), w) for w in widths if w != 512]
    for what, n, width in runs:
        if str(width if what == "widths" else n) in results[what]:
            continue
        model, guide, rates = _fit(
            x[:n], y[:n], width, settings, min_steps, progress, f"{width} units, {n} images"
        )
        results[what][str(width if what == "widths" else n)] = rates
        if what == "rates" and n == max(sizes):
            results["widths"]["512"] = rates
            test_x = splits.test[0].flatten(1)
            probs = predict(model, guide, test_x, num_samples=settings.num_samples).probs["obs"]
            results["accuracy"] = accuracy(probs, splits.test[1])
        save_results(out, results)
    _figure(results, out / "concrete_rates.png")
    return results
