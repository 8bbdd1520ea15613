"""A figure of the UCI results: every method per data set, next to the published MC-dropout band."""

from __future__ import annotations

import math
from typing import Any

from .published import PUBLISHED, REFERENCE
from .summary import methods_in, summarise

__all__ = ["plot_uci"]


def plot_uci(rows: list[dict[str, Any]], metric: str = "test_ll") -> Any:
    """One panel per data set: each method's mean ± standard error over its splits.

    The shaded band is the 2018 re-run of MC dropout (mean ± its standard error); the small
    number over each point is how many splits it averages.

    :param rows: per-split results, as from :func:`~pyro_dropout_experiments.uci.collect`.
    :param metric: ``"test_ll"`` (higher is better) or ``"rmse"`` (lower is better).
    :returns: a matplotlib ``Figure``.
    """
    if metric not in ("test_ll", "rmse"):
        raise ValueError(f"plot_uci: metric must be 'test_ll' or 'rmse', got {metric!r}")
    if not rows:
        raise ValueError("plot_uci: no results to plot")
    from pyro_dropout.export import pyplot

    plt = pyplot()
    summary = summarise(rows)
    datasets = sorted({d for d, _ in summary})
    methods = methods_in(summary)
    # each panel lists only the methods run on its data set (no empty rows), three panels a row,
    # each row as tall as its longest list
    present = {d: [m for m in methods if (d, m) in summary] for d in datasets}
    cols = min(3, len(datasets))
    nrows = math.ceil(len(datasets) / cols)
    heights = [
        max(len(present[d]) for d in datasets[r * cols : (r + 1) * cols]) * 0.3 + 1.0 for r in range(nrows)
    ]
    width = max(4.2 * cols, 5.5)  # one panel: wide enough for the caption
    fig, axes = plt.subplots(
        nrows,
        cols,
        figsize=(width, sum(heights) + 0.6),
        gridspec_kw={"height_ratios": heights},
        squeeze=False,
    )
    flat = list(axes.flat)
    for ax, d in zip(flat, datasets, strict=False):
        _panel(ax, d, summary, present[d], metric)
    for ax in flat[len(datasets) :]:
        ax.set_visible(False)
    label = "test log-likelihood (higher is better)" if metric == "test_ll" else "test RMSE (lower is better)"
    sep = "\n" if cols < 3 else "; "  # a caption of one line fits three panels or more
    fig.supxlabel(label + sep + "band: MC dropout, 2018 re-run; numbers: splits averaged", fontsize=9)
    fig.tight_layout()
    return fig


def _panel(ax: Any, d: str, summary: dict, methods: list[str], metric: str) -> None:
    """One data set: the published band, then each method's mean ± standard error."""
    from matplotlib.ticker import MaxNLocator

    index = 0 if metric == "rmse" else 2
    ref = PUBLISHED[REFERENCE].get(d)
    if ref is not None:
        mean, se = ref[index], ref[index + 1]
        ax.axvspan(mean - se, mean + se, color="tab:orange", alpha=0.3, lw=0)
        ax.axvline(mean, color="tab:orange", lw=1, label="MC dropout, 2018 re-run")
    for y, m in enumerate(methods):
        if (d, m) not in summary:
            continue
        s = summary[(d, m)]
        mean, se = s[metric]
        ax.errorbar(mean, y, xerr=se if math.isfinite(se) else None, fmt="o", color="tab:blue", ms=4)
        ax.annotate(
            str(s["splits"]), (mean, y), xytext=(0, 4), textcoords="offset points", fontsize=6, ha="center"
        )
    ax.set_yticks(range(len(methods)), methods, fontsize=8)
    ax.set_ylim(len(methods) - 0.5, -0.5)
    ax.set_title(d, fontsize=9)
    ax.tick_params(axis="x", labelsize=7)
    ax.xaxis.set_major_locator(MaxNLocator(4))  # at most four ticks: their labels never overlap
    ax.grid(axis="x", alpha=0.3)
