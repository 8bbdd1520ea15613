"""The OOD comparison's figures: a reliability diagram per method, and per method the histograms
of predictive entropy and mutual information on MNIST against each OOD set."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from pyro_dropout.export import pyplot
from pyro_dropout.metrics import reliability_diagram

from ..core import save_figure
from .scores import uncertainty

__all__ = ["ood_figures"]


def _reliability(probs: dict[str, dict[str, torch.Tensor]], labels: torch.Tensor, path: Path) -> None:
    plt = pyplot()
    fig, axes = plt.subplots(1, len(probs), figsize=(3.2 * len(probs), 3.4), squeeze=False)
    for ax, (name, by_set) in zip(axes[0], probs.items(), strict=True):
        d = reliability_diagram(by_set["test"], labels, 15)
        edges = d.bin_edges.cpu().numpy()
        centres, used = (edges[:-1] + edges[1:]) / 2, d.counts.cpu().numpy() > 0
        ax.bar(centres[used], d.accuracy.cpu().numpy()[used], width=np.diff(edges)[used], edgecolor="k")
        ax.plot([0, 1], [0, 1], "k--", lw=1)
        ax.set(title=f"{name}\nECE {d.ece:.4f}", xlabel="confidence", xlim=(0, 1), ylim=(0, 1))
    axes[0][0].set_ylabel("accuracy")
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)


def _histograms(probs: dict[str, dict[str, torch.Tensor]], path: Path) -> None:
    plt = pyplot()
    scores = ("predictive_entropy", "mutual_information")
    fig, axes = plt.subplots(len(scores), len(probs), figsize=(3.2 * len(probs), 5.4), squeeze=False)
    for col, (name, by_set) in enumerate(probs.items()):
        per_set = {k: uncertainty(v) for k, v in by_set.items()}
        for row, score in enumerate(scores):
            ax = axes[row][col]
            values = {k: s[score].cpu().numpy() for k, s in per_set.items()}
            bins = np.histogram_bin_edges(np.concatenate(list(values.values())), bins=30)
            for k, v in values.items():
                ax.hist(v, bins=bins, alpha=0.5, density=True, label="mnist" if k == "test" else k)
            ax.set(title=name if row == 0 else "", xlabel=score.replace("_", " "))
            ax.set_yscale("log")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)


def ood_figures(probs: dict[str, dict[str, torch.Tensor]], labels: torch.Tensor, out: Path) -> None:
    """``reliability.png`` and ``ood_histograms.png`` in ``out``."""
    if probs:
        _reliability(probs, labels, out / "reliability.png")
        _histograms(probs, out / "ood_histograms.png")
