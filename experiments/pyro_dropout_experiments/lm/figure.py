"""The language-model figure: for each variant, the AUROC of each score (per character and per
sequence) at telling the other domain (left) and shuffled text (right) from the held-out text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from pyro_dropout.export import pyplot

from ..core import save_figure

__all__ = ["BARS", "lm_figure", "lm_table"]

BARS = (
    ("character", "predictive_entropy", "entropy, per character"),
    ("character", "mutual_information", "MI, per character"),
    ("sequence", "predictive_entropy", "entropy, per sequence"),
    ("sequence", "mutual_information", "MI, per sequence"),
)


def _mean(runs: dict[str, Any], against: str, level: str, score: str) -> float:
    return float(np.mean([run["auroc"][against][level][score] for run in runs.values()]))


def lm_figure(results: dict[str, Any], path: Path) -> None:
    plt = pyplot()
    variants = list(results["runs"])
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), sharey=True)
    width = 0.8 / len(BARS)
    for ax, against in zip(axes, ("other domain", "shuffled"), strict=True):
        for k, (level, score, label) in enumerate(BARS):
            values = [_mean(results["runs"][v], against, level, score) for v in variants]
            ax.bar(np.arange(len(variants)) + (k - 1.5) * width, values, width, label=label)
        ax.axhline(0.5, color="0.5", linewidth=0.8, linestyle=":")
        told = "the standard library's docstrings" if against == "other domain" else "shuffled text"
        ax.set(title=f"held-out PyTorch docstrings against {told}", ylim=(0, 1), ylabel="AUROC")
        ax.set_xticks(np.arange(len(variants)), variants)
    axes[0].legend(fontsize=8, loc="lower left")
    fig.tight_layout()
    save_figure(fig, path, dpi=100)
    plt.close(fig)


def lm_table(results: dict[str, Any]) -> str:
    """The docs' table: each variant's perplexity, ECE, the sequence-level AUROC of the mutual
    information and of the entropy against each set, and the adapters' rates, over its runs (mean;
    ± the sd across runs where there are several)."""

    def cell(values: list[float], digits: int) -> str:
        mean = float(np.mean(values))
        spread = f" ± {float(np.std(values, ddof=1)):.{digits}f}" if len(values) > 1 else ""
        return f"{mean:.{digits}f}{spread}"

    lines = [
        "| variant | runs | perplexity | ECE | MI AUROC, other domain | MI AUROC, shuffled | "
        "entropy AUROC, other domain | entropy AUROC, shuffled | adapters' rates |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for variant, runs in results["runs"].items():
        rows = list(runs.values())
        auroc = {
            (a, k): [r["auroc"][a]["sequence"][k] for r in rows]
            for a in ("other domain", "shuffled")
            for k in ("mutual_information", "predictive_entropy")
        }
        rates = [p for r in rows for p in r["rates"].values()]
        shown = f"{min(rates):.3f}-{max(rates):.3f}" if max(rates) - min(rates) > 5e-4 else f"{rates[0]:.3f}"
        cells = [
            cell([r["perplexity"] for r in rows], 2),
            cell([r["ece"] for r in rows], 3),
            cell(auroc["other domain", "mutual_information"], 3),
            cell(auroc["shuffled", "mutual_information"], 3),
            cell(auroc["other domain", "predictive_entropy"], 3),
            cell(auroc["shuffled", "predictive_entropy"], 3),
        ]
        lines.append(f"| {variant} | {len(rows)} | " + " | ".join(cells) + f" | {shown} |")
    return "\n".join(lines)
