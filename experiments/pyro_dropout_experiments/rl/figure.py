"""The RL figure: average return against training batches, log scale (paper 000 Fig. 6)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from pyro_dropout.export import pyplot

from ..core import save_figure

__all__ = ["return_curve", "rl_figure"]


def return_curve(episodes: list[list[float]], grid: np.ndarray, window: float = 0.25) -> np.ndarray:
    """At each batch count g of ``grid``, the mean return of the episodes ending in
    ``((1 - window) g, g]`` (NaN where none did)."""
    ends = np.array([b for b, _ in episodes], dtype=float)
    returns = np.array([r for _, r in episodes], dtype=float)
    out = np.full(len(grid), np.nan)
    for i, g in enumerate(grid):
        inside = (ends > (1 - window) * g) & (ends <= g)
        if inside.any():
            out[i] = returns[inside].mean()
    return out


def rl_figure(results: dict[str, Any], path: Path) -> None:
    plt = pyplot()
    batches = results["settings"]["batches"]
    grid = np.unique(np.geomspace(10, batches, 60).round())
    fig, ax = plt.subplots(figsize=(5.2, 3.6))
    for policy, runs in results["runs"].items():
        curves = np.stack([return_curve(r["episodes"], grid) for r in runs.values()])
        seen = np.isfinite(curves)
        mean = np.where(seen, curves, 0).sum(0) / np.maximum(seen.sum(0), 1)
        mean[~seen.any(0)] = np.nan
        ax.plot(grid, mean, label=f"{policy} ({len(runs)} runs)")
    ax.set(xscale="log", yscale="log", xlabel="training batches", ylabel="average return")
    ax.set_title(f"{results['settings']['env']}: DQN with dropout", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)
