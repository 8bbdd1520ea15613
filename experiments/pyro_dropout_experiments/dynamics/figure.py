"""The model-based RL figure (paper 001 Fig. 9's counterpart): p of each layer, and the
epistemic sd of each state component, against the episodes seen; the episodes' returns."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from pyro_dropout.export import pyplot

from ..core import save_figure

__all__ = ["STATE", "dynamics_figure"]

STATE = ("x", "ẋ", "θ", "θ̇")


def _series(runs: dict[str, Any], key: str) -> tuple[np.ndarray, np.ndarray]:
    """Episodes seen, and ``key`` averaged over the runs ``[episodes, ...]``."""
    first = next(iter(runs.values()))["episodes"]
    seen = np.array([r["episodes_seen"] for r in first])
    values = np.stack([np.array([r[key] for r in run["episodes"]], dtype=float) for run in runs.values()])
    return seen, values.mean(0)


def dynamics_figure(results: dict[str, Any], path: Path) -> None:
    plt = pyplot()
    fig, axes = plt.subplots(2, 4, figsize=(13, 5.6))
    for agent, runs in results["runs"].items():
        seen, rates = _series(runs, "rates")
        for layer in range(rates.shape[1]):
            axes[0][layer].plot(seen, rates[:, layer], label=agent)
            axes[0][layer].set(title=f"p of layer {layer + 1}", xlabel="episodes seen", ylim=(0, None))
        seen, returns = _series(runs, "return")
        axes[0][3].plot(seen + 1, returns, label=agent)
        seen, sd = _series(runs, "epistemic_sd")
        for k, name in enumerate(STATE):
            axes[1][k].plot(seen, sd[:, k], label=agent)
            axes[1][k].set(title=f"epistemic sd of Δ{name}", xlabel="episodes seen", yscale="log")
    axes[0][3].set(title="return of each episode", xlabel="episode")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path, dpi=100)
    plt.close(fig)
