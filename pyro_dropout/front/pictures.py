"""The front door's pictures: a reliability diagram, a 1-d predictive band and the histograms of an
uncertainty score on in- and out-of-distribution inputs, each drawn from the front door's own draws
(``MCDropout.plot``) by :mod:`pyro_dropout.export`'s plots."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from ..export import plot_regression, plot_reliability, plot_score_histograms
from ..metrics import reliability_diagram
from ..runtime import write_atomically

__all__ = ["KINDS", "draw", "save"]

KINDS = ("reliability", "band", "ood")


def _reliability(front: Any, x: Any, y: torch.Tensor, num_samples: int | None = None) -> Any:
    probs = front.probs(x, num_samples)
    return plot_reliability(
        reliability_diagram(probs, y), title=f"Reliability diagram, {probs.shape[0]} draws"
    )


def _band(
    front: Any,
    x: torch.Tensor,
    x_train: Any = None,
    y_train: Any = None,
    y_true: Any = None,
    num_samples: int | None = None,
) -> Any:
    if front.task != "regression" or not isinstance(x, torch.Tensor) or x.dim() != 2 or x.shape[1] != 1:
        raise ValueError(
            "MCDropout.plot('band'): a regression on one input feature, x of shape [N, 1]; "
            f"got task {front.task!r} and x of shape {tuple(getattr(x, 'shape', ()))}"
        )
    sd = front.uncertainty(x, num_samples)["predictive_sd"]
    mean = front.predict(x, num_samples).means["obs"].mean(0)
    return plot_regression(
        x[:, 0], mean, sd, x_train=x_train, y_train=y_train, y_true=y_true, title="MC dropout predictive"
    )


def _ood(
    front: Any, x_in: Any, x_out: Any, score: str = "mutual_information", num_samples: int | None = None
) -> Any:
    scores_in, scores_out = (front.uncertainty(x, num_samples) for x in (x_in, x_out))
    if score not in scores_in:
        raise ValueError(f"MCDropout.plot('ood'): score must be one of {', '.join(scores_in)}, got {score!r}")
    return plot_score_histograms(scores_in[score], scores_out[score], name=score.replace("_", " "))


def draw(front: Any, kind: str, *args: Any, **kwargs: Any) -> Any:
    """The figure ``kind`` of ``front``'s predictive."""
    pictures: dict[str, Callable[..., Any]] = {"reliability": _reliability, "band": _band, "ood": _ood}
    if kind not in pictures:
        raise ValueError(f"MCDropout.plot: kind must be one of {', '.join(KINDS)}, got {kind!r}")
    return pictures[kind](front, *args, **kwargs)


def save(figure: Any, path: str | os.PathLike) -> Path:
    """``figure`` to ``path`` (its format from the suffix) atomically; a link is refused."""
    return write_atomically(path, lambda temporary: figure.savefig(temporary, dpi=110), "MCDropout.plot")
