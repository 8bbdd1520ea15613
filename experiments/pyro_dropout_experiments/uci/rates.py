"""The dropout rates Concrete dropout learned, per layer and split: paper 001, Fig. 4."""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from .labels import label_of

__all__ = ["learned_rates", "plot_learned_rates"]


def learned_rates(rows: list[dict[str, Any]], method: str = "concrete") -> dict[str, dict[str, list[float]]]:
    """``{dataset: {layer: [p of split 0, 1, ...]}}`` from the result rows labelled ``method``
    (e.g. ``concrete``, ``concrete-per-draw``) that stored learned rates, in split order."""
    found: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        if label_of(row) == method and row.get("learned_p"):
            found[row["dataset"]].append(row)
    if not found:
        labels = sorted({label_of(r) for r in rows if r.get("learned_p")})
        raise ValueError(
            f"no results of method {method!r} with learned dropout rates; "
            f"those with rates: {labels or 'none'}"
        )
    out: dict[str, dict[str, list[float]]] = {}
    for dataset, runs in sorted(found.items()):
        runs.sort(key=lambda r: r["split"])
        layers = list(runs[0]["learned_p"])
        out[dataset] = {layer: [float(r["learned_p"][layer]) for r in runs] for layer in layers}
    return out


def _layer_name(position: int, count: int) -> str:
    """The ``position``-th of ``count`` weight layers, in the network's order: the first is the
    input layer, the last the output layer."""
    if position == 0:
        return "input layer"
    return "output layer" if position == count - 1 else f"hidden layer {position}"


def plot_learned_rates(rows: list[dict[str, Any]], method: str = "concrete") -> Any:
    """One panel per data set: the learned drop probability of each weight layer against the
    split, on a log scale, as paper 001's Fig. 4.

    :param rows: per-split results, as from :func:`~pyro_dropout_experiments.uci.collect`.
    :returns: a matplotlib ``Figure``.
    """
    from pyro_dropout.export import pyplot

    rates = learned_rates(rows, method)
    plt = pyplot()
    cols = min(4, len(rates))
    nrows = math.ceil(len(rates) / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(3.4 * cols + 0.6, 2.8 * nrows + 0.6), squeeze=False)
    flat = list(axes.flat)
    for ax, (dataset, layers) in zip(flat, rates.items(), strict=False):
        for position, (site, ps) in enumerate(layers.items()):
            label = _layer_name(position, len(layers))
            ax.plot(range(len(ps)), [max(p, 1e-8) for p in ps], "o-", ms=3, lw=0.8, label=f"{label} ({site})")
        ax.set(title=dataset, yscale="log", ylim=(1e-8, 1), xlabel="split")
        ax.grid(alpha=0.3)
    for ax in flat[len(rates) :]:
        ax.set_visible(False)
    flat[0].set_ylabel("learned p")
    flat[0].legend(fontsize=7)
    fig.suptitle(f"{method}: the drop probability learned per layer and split (below 1e-8 drawn at 1e-8)")
    fig.tight_layout()
    return fig
