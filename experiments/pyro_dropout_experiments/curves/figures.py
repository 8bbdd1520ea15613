"""Figures in paper 000's style: the observed function in red, the predictive mean in blue with
shades of half a standard deviation out to two, the end of the training data dashed in blue."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..core import save_figure, save_results

__all__ = ["plot_panel", "save_panels", "write_results"]


def plot_panel(
    ax: Any,
    t: np.ndarray,
    y: np.ndarray,
    grid: np.ndarray,
    mean: Sequence[float],
    sd: Sequence[float],
    title: str,
    train_end: float | None = None,
    gaps: Sequence[tuple[float, float]] = (),
    x_star: float | None = None,
    sds: float = 2.0,
) -> None:
    """One model: readings ``y`` at ``t``, the predictive ``mean`` and ``sd`` on ``grid``, shades of
    half a standard deviation out to ``sds``; the training end (extrapolation) or the held-out
    ``gaps`` (interpolation) marked, and ``x_star``, a point far from the data, dashed in red."""
    m, s = np.asarray(mean), np.asarray(sd)
    shades = max(1, round(2 * sds))
    for k in range(shades, 0, -1):
        ax.fill_between(grid, m - 0.5 * k * s, m + 0.5 * k * s, color="tab:blue", alpha=0.12, lw=0)
    ax.plot(t, y, color="red", lw=1.0, label="observed")
    ax.plot(grid, m, color="navy", lw=1.0, label="predictive mean")
    if train_end is not None:
        ax.axvline(train_end, color="blue", ls="--", lw=1.0)
    for lo, hi in gaps:
        ax.axvspan(lo, hi, color="0.85", zorder=0)
    if x_star is not None:
        ax.axvline(x_star, color="red", ls="--", lw=0.8)
    ax.set_title(title, fontsize=9)


def save_panels(path: Path, panels: list[dict[str, Any]], columns: int = 2) -> Path:
    """A figure of ``plot_panel(**panel)`` panels, ``columns`` wide, written to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = -(-len(panels) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(5 * columns, 2.6 * rows), squeeze=False)
    for ax, panel in zip(axes.flat, panels, strict=False):
        plot_panel(ax, **panel)
    for ax in list(axes.flat)[len(panels) :]:
        ax.axis("off")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    save_figure(fig, path, dpi=110)
    plt.close(fig)
    return path


def write_results(out: Path, results: dict[str, Any], draw: Any, name: str) -> dict[str, Any]:
    """Write ``results.json`` and the figure ``draw(results, out / name)`` to ``out``; return the results."""
    save_results(out, results)
    draw(results, out / name)
    return results
