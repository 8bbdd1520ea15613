"""The bandit figure: cumulative regret against rounds, one panel per δ."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pyro_dropout.export import pyplot

from ..core import save_figure

__all__ = ["bandit_figure"]


def bandit_figure(results: dict[str, Any], path: Path) -> None:
    plt = pyplot()
    deltas = list(results["deltas"])
    fig, axes = plt.subplots(1, len(deltas), figsize=(3.4 * len(deltas), 3.2), squeeze=False)
    for ax, delta in zip(axes[0], deltas, strict=True):
        for policy, record in results["deltas"][delta].items():
            ax.plot(range(1, len(record["cumulative"]) + 1), record["cumulative"], label=policy)
        ax.set(title=f"δ = {delta}", xlabel="round", yscale="log")
    axes[0][0].set_ylabel("cumulative regret")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)
