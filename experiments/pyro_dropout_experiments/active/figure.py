"""The figure (test error against labelled images, one line per acquisition function) and the
table (images needed to reach 10% and 5% test error)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from pyro_dropout.export import pyplot

from ..core import save_figure

__all__ = ["PAPER_TABLE_1", "active_figure", "active_table", "paper_table", "pooled"]


# Gal, Islam & Ghahramani (2017), Table 1: the acquired images each function needed to reach 10%
# and 5% test error on MNIST. The paper's own text could not be reached from this project's
# machine; these are the figures as a public re-implementation transcribes them from it (its
# README), which gives no row for Mean STD.
PAPER_TABLE_1: dict[str, tuple[int, int]] = {
    "bald": (145, 335),
    "variation_ratios": (120, 295),
    "max_entropy": (165, 355),
    "random": (255, 835),
}


def pooled(*results: dict[str, Any]) -> dict[str, Any]:
    """One results dict holding every run of each of ``results`` (runs made with the same settings
    up to the rounds compared, kept in separate files): run ``seed`` of the i-th is ``"i:seed"``."""
    runs: dict[str, dict[str, Any]] = {}
    for i, result in enumerate(results):
        for acquisition, by_seed in result["runs"].items():
            runs.setdefault(acquisition, {}).update({f"{i}:{seed}": r for seed, r in by_seed.items()})
    return {"runs": runs}


def _curves(runs: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """The labelled counts and ``[runs, rounds]`` errors, cut to the shortest run."""
    shortest = min(len(r["error"]) for r in runs.values())
    labelled = np.array(next(iter(runs.values()))["labelled"][:shortest])
    return labelled, np.array([r["error"][:shortest] for r in runs.values()])


def active_figure(results: dict[str, Any], path: Path) -> None:
    plt = pyplot()
    s = results["settings"]
    fig, ax = plt.subplots(figsize=(5.6, 3.8))
    for acquisition, runs in sorted(results["runs"].items()):
        labelled, errors = _curves(runs)
        line = ax.plot(
            labelled,
            100 * errors.mean(0),
            label=f"{acquisition} ({len(runs)} run{'s' * (len(runs) != 1)})",
            lw=1.4,
        )
        if len(runs) > 1:
            low, high = 100 * errors.min(0), 100 * errors.max(0)
            ax.fill_between(labelled, low, high, color=line[0].get_color(), alpha=0.15, lw=0)
    for level in (10, 5):
        ax.axhline(level, color="0.6", lw=0.6, ls=":")
    ax.set(xlabel="labelled images", ylabel="test error (%)", ylim=(0, None))
    pool = "Repeated MNIST" if s.get("copies", 1) > 1 else "MNIST"
    ax.set_title(f"{pool}: MC-dropout acquisition, {s['k']} images a round", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)


def _cell(values: list[float | None]) -> str:
    reached = [v for v in values if v is not None]
    if not reached:
        return "not reached"
    mean = f"{sum(reached) / len(reached):.0f}"
    return mean if len(reached) == len(values) else f"{mean} ({len(reached)} of {len(values)} runs)"


def active_table(results: dict[str, Any]) -> str:
    """A Markdown table: per function, the images at which each run first reached 10% and 5% test
    error (the mean over the runs that did), and the final error."""
    lines = [
        "| acquisition | runs | images to 10% error | images to 5% error | final error |",
        "|---|---:|---:|---:|---:|",
    ]
    for acquisition, runs in sorted(results["runs"].items()):
        r = list(runs.values())
        final = sum(x["error"][-1] for x in r) / len(r)
        cells = [_cell([x["to_0.1"] for x in r]), _cell([x["to_0.05"] for x in r])]
        lines.append(f"| {acquisition} | {len(r)} | {cells[0]} | {cells[1]} | {100 * final:.2f}% |")
    return "\n".join(lines)


def paper_table(
    columns: list[tuple[str, dict[str, Any]]], error: float = 0.1, dropout_off: bool = False
) -> str:
    """A Markdown table of the images each function needed to reach ``error`` test error (0.1 or
    0.05, the paper's two marks): the paper's (:data:`PAPER_TABLE_1`), 1.5 times it, then one
    column per ``(label, results)`` run of this command (the mean over the runs that got there, as
    :func:`active_table`); ``dropout_off``: by the test error with dropout off, as the authors
    measured it (runs made before it was recorded: "not recorded")."""
    marks = {0.1: 0, 0.05: 1}
    if error not in marks:
        raise ValueError(f"paper_table: error must be one of the paper's marks {sorted(marks)}: {error!r}")
    key = f"to_{error:g}" + ("_dropout_off" if dropout_off else "")
    head = "| acquisition | paper | 1.5 × paper | " + " | ".join(label for label, _ in columns) + " |"
    lines = [head, "|---|---:|---:|" + "---:|" * len(columns)]
    for acquisition, counts in PAPER_TABLE_1.items():
        paper = counts[marks[error]]
        cells = []
        for _, results in columns:
            runs = results["runs"].get(acquisition, {})
            if not runs:
                cells.append("not run")
            elif any(key not in x for x in runs.values()):
                cells.append("not recorded")
            else:
                cells.append(_cell([x[key] for x in runs.values()]))
        lines.append(f"| {acquisition} | {paper} | {1.5 * paper:.0f} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
