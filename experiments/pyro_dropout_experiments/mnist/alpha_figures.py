"""The figures of paper 003's MNIST experiments: accuracy and test log-likelihood against α
(Figs. 4-5), and the two attacks (Figs. 6-7) with their images under the axes."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from pyro_dropout.export import pyplot

from ..core import save_figure

__all__ = ["attack_figure", "bbalpha_figure", "mean_se"]

_NAMES = {"mlp": "2x100 MLP", "cnn": "Keras CNN"}


def mean_se(values: list[float]) -> tuple[float, float]:
    """Mean and standard error (0 for a single value)."""
    v = np.asarray(values, dtype=float)
    return float(v.mean()), float(v.std(ddof=1) / math.sqrt(len(v))) if len(v) > 1 else 0.0


def bbalpha_figure(results: dict[str, Any], settings: Any, path: Path) -> None:
    """One row per model: test accuracy and test log-likelihood against α, mean ± standard error."""
    models = [m for m in settings.models if m in results]
    if not models:
        return
    plt = pyplot()
    fig, axes = plt.subplots(len(models), 2, figsize=(7.5, 2.9 * len(models)), squeeze=False)
    for row, name in zip(axes, models, strict=True):
        keys = list(results[name])
        for ax, metric, label in zip(
            row, ("accuracy", "test_ll"), ("test accuracy", "test log-likelihood"), strict=True
        ):
            stats = [mean_se(results[name][k][metric]) for k in keys]
            ax.errorbar(
                range(len(keys)), [m for m, _ in stats], yerr=[e for _, e in stats], fmt="o-", capsize=4
            )
            ax.set(xticks=range(len(keys)), xticklabels=[f"α={k}" for k in keys], ylabel=label)
            ax.set_title(f"{_NAMES[name]}: {label}", fontsize=10)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)


def _image_strip(fig: Any, rect: tuple, images: dict[str, np.ndarray], names: list[str], ticks: list) -> None:
    """A grid of 28x28 images: one row per model, one column per tick."""
    rows = len(names)
    height = rect[3] / rows
    for r, name in enumerate(names):
        ax = fig.add_axes((rect[0], rect[1] + (rows - 1 - r) * height, rect[2], height * 0.95))
        ax.imshow(np.concatenate(list(images[name]), axis=1), cmap="gray_r", vmin=0, vmax=255)
        ax.set_xticks([28 * i + 13.5 for i in range(len(ticks))], [f"{t:g}" for t in ticks], fontsize=6)
        ax.set_yticks([])
        ax.set_ylabel(name, rotation=0, ha="right", va="center", fontsize=7)


def attack_figure(part: dict[str, Any], x_key: str, x_label: str, path: Path, log_x: bool = False) -> None:
    """Accuracy, predictive entropy and detection AUROC against ``x_key`` for every model, and
    each model's example image under the attack below the axes."""
    plt = pyplot()
    names = list(part)
    fig, axes = plt.subplots(1, 3, figsize=(12, 6.5))
    fig.subplots_adjust(bottom=0.5, wspace=0.3, left=0.07, right=0.98, top=0.93)
    for name in names:
        m = part[name]
        x = m[x_key]
        (line,) = axes[0].plot(x, m["accuracy"], "-", label=name)
        if "target_accuracy" in m:
            axes[0].plot(x, m["target_accuracy"], "--", color=line.get_color())
        axes[1].plot(x, m["entropy"], "-", color=line.get_color())
        axes[2].plot(x, m["auroc_entropy"], "-", color=line.get_color())
        axes[2].plot(x, m["auroc_mutual_information"], ":", color=line.get_color())
    titles = (
        "accuracy" + (" (dashed: on the target)" if "target_accuracy" in part[names[0]] else ""),
        "predictive entropy",
        "AUROC, clean vs attacked (solid: entropy, dotted: MI)",
    )
    for ax, title in zip(axes, titles, strict=True):
        ax.set(xlabel=x_label)
        ax.set_title(title, fontsize=9)
        if log_x:
            ax.set_xscale("log")
    axes[0].legend(fontsize=7)
    images = {n: np.asarray(part[n]["example"], dtype=np.uint8) for n in names}
    _image_strip(fig, (0.07, 0.03, 0.9, 0.36), images, names, part[names[0]]["example_at"])
    save_figure(fig, path, dpi=110)
    plt.close(fig)
