r"""Plots of the MC-dropout predictive; each function returns a matplotlib ``Figure``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from ..metrics.classification import ReliabilityDiagram

__all__ = ["plot_regression", "plot_reliability", "plot_score_histograms", "plot_softmax_scatter", "pyplot"]


def _np(x: Any) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy()
    return np.asarray(x)


def pyplot() -> Any:
    """``matplotlib.pyplot`` on a backend that needs no screen (Agg, unless an inline one is active)."""
    import matplotlib

    if matplotlib.get_backend().lower() not in ("agg", "module://matplotlib_inline.backend_inline"):
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_regression(
    x: Any,
    mean: Any,
    sd: Any,
    *,
    x_train: Any = None,
    y_train: Any = None,
    y_true: Any = None,
    train_range: tuple[float, float] | None = None,
    n_sd: float = 2.0,
    title: str = "MC dropout predictive",
    ax: Any = None,
) -> Any:
    r"""Predictive mean ± ``n_sd`` standard deviations in shades of half a standard deviation.

    As paper [1], Fig. 2: every shade adds half a standard deviation; the training range is
    marked with dashed lines (taken from ``x_train`` when ``train_range`` is not given).

    :param x: test inputs ``[N]`` (1-d).
    :param mean: predictive mean ``[N]``; ``sd``: predictive standard deviation ``[N]``.
    :param y_true: the true function at ``x`` ``[N]``, drawn as a red line labelled "true function".
    :param ax: a matplotlib axes to draw into (a panel of a larger figure); default a new figure.
    :returns: the figure.
    """
    xs, m, s = _np(x).reshape(-1), _np(mean).reshape(-1), _np(sd).reshape(-1)
    if not (xs.shape == m.shape == s.shape):
        raise ValueError(f"x, mean and sd must have the same length, got {xs.shape}, {m.shape}, {s.shape}")
    order = np.argsort(xs)
    xs, m, s = xs[order], m[order], s[order]
    fig, ax = pyplot().subplots(figsize=(8, 4)) if ax is None else (ax.figure, ax)
    steps = np.arange(0.5, n_sd + 1e-9, 0.5)
    for i, k in enumerate(steps[::-1]):
        ax.fill_between(xs, m - k * s, m + k * s, color="tab:blue", alpha=0.12 + 0.1 * i / len(steps), lw=0)
    ax.plot(xs, m, color="tab:blue", lw=1.5, label=f"predictive mean ± {n_sd:g} sd (shades: ½ sd)")
    if y_true is not None:
        ax.plot(xs, _np(y_true).reshape(-1)[order], color="tab:red", lw=1, label="true function")
    if x_train is not None and y_train is not None:
        xt, yt = _np(x_train).reshape(-1), _np(y_train).reshape(-1)
        ax.scatter(xt, yt, s=5, color="k", label="training data")
    if train_range is None and x_train is not None:
        xt = _np(x_train).reshape(-1)
        train_range = (float(xt.min()), float(xt.max()))
    if train_range is not None:
        for edge in train_range:
            ax.axvline(edge, color="tab:blue", ls="--", lw=1)
    ax.set(xlabel="x", ylabel="y", title=title)
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    return fig


def plot_reliability(diagram: ReliabilityDiagram, title: str = "Reliability diagram") -> Any:
    """Accuracy against confidence per bin, the diagonal of perfect calibration, and the bin counts."""
    plt = pyplot()
    edges = _np(diagram.bin_edges)
    centres, width = (edges[:-1] + edges[1:]) / 2, np.diff(edges)
    acc, conf, counts = _np(diagram.accuracy), _np(diagram.confidence), _np(diagram.counts)
    fig, (ax, axc) = plt.subplots(2, 1, figsize=(5, 6), sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    used = counts > 0
    ax.bar(
        centres[used],
        acc[used],
        width=width[used],
        edgecolor="k",
        color="tab:blue",
        label="accuracy",
    )
    ax.bar(
        centres[used],
        (conf - acc)[used],
        bottom=acc[used],
        width=width[used],
        color="tab:red",
        alpha=0.3,
        edgecolor="tab:red",
        label="gap to confidence",
    )
    ax.plot([0, 1], [0, 1], "k--", lw=1, label="perfect calibration")
    ax.set(ylabel="accuracy", ylim=(0, 1), title=f"{title} (ECE = {diagram.ece:.3f})")
    ax.legend(loc="upper left", fontsize=8)
    axc.bar(centres, counts, width=width, color="grey", edgecolor="k")
    axc.set(xlabel="confidence (top-class probability of the MC mean)", ylabel="count", xlim=(0, 1))
    fig.tight_layout()
    return fig


def plot_score_histograms(
    scores_in: Any,
    scores_out: Any,
    name: str = "uncertainty",
    labels: tuple[str, str] = ("in-distribution", "out-of-distribution"),
) -> Any:
    """Histograms of an uncertainty score on in- and out-of-distribution inputs."""
    plt = pyplot()
    a, b = _np(scores_in).reshape(-1), _np(scores_out).reshape(-1)
    bins = np.histogram_bin_edges(np.concatenate([a, b]), bins=40)
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.hist(a, bins=bins, alpha=0.6, density=True, label=labels[0])
    ax.hist(b, bins=bins, alpha=0.6, density=True, label=labels[1])
    ax.set(xlabel=name, ylabel="density", title=f"{name}: {labels[0]} vs {labels[1]}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_softmax_scatter(
    logits: Any,
    top_k: int = 3,
    input_labels: Sequence[str] | None = None,
    class_names: Sequence[str] | None = None,
) -> Any:
    r"""Scatter of ``T`` stochastic passes of the softmax input and output along a sequence of inputs.

    As paper [1], Fig. 4: for each of ``M`` inputs (e.g. a digit rotated step by step), the
    softmax input (logits) on the left and the softmax output on the right, for every class that
    is the most probable one at some input (so that a class a printout names is in the figure),
    then the classes of highest mean probability over the sequence, up to ``top_k`` in all.

    :param logits: ``[T, M, C]`` network outputs before the softmax.
    """
    plt = pyplot()
    z = torch.as_tensor(_np(logits)).double()
    if z.dim() != 3:
        raise ValueError(f"logits: expected [T, M, C] (passes, inputs, classes), got {tuple(z.shape)}")
    probs = torch.softmax(z, -1)
    top = list(dict.fromkeys(probs.mean(0).argmax(-1).tolist()))  # each input's most probable class
    by_mean = [c for c in probs.mean((0, 1)).argsort(descending=True).tolist() if c not in top]
    top += by_mean[: max(0, top_k - len(top))]
    t, m, _ = z.shape
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for c in top:
        name = class_names[c] if class_names is not None else str(c)
        xs = np.repeat(np.arange(m)[None, :], t, 0).reshape(-1) + np.random.default_rng(c).uniform(
            -0.15, 0.15, t * m
        )
        axes[0].scatter(xs, z[:, :, c].numpy().reshape(-1), s=3, alpha=0.3, label=f"class {name}")
        axes[1].scatter(xs, probs[:, :, c].numpy().reshape(-1), s=3, alpha=0.3, label=f"class {name}")
    for ax, what in zip(axes, ("softmax input", "softmax output"), strict=True):
        ax.set(xlabel="input", ylabel=what, title=f"{t} stochastic passes: {what}")
        ax.set_xticks(range(m))
        if input_labels is not None:
            ax.set_xticklabels(list(input_labels), rotation=45, fontsize=7)
        ax.legend(fontsize=8, markerscale=4)
    fig.tight_layout()
    return fig
