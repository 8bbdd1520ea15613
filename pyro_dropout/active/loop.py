"""The active-learning loop: train on the labelled set, score the pool, ask the oracle for the
``k`` best, repeat; the test error recorded after every round.

    learner = ActiveLearner(fit, x_pool, y_pool, x_test, y_test, acquisition="bald", k=10)
    history = learner.run(rounds=50)          # [{"labelled": 20, "error": 0.31}, ...]

``fit(x, y)`` returns a trained ``(model, guide)`` pair on the labelled rows: each round trains
from scratch by default (the rounds then differ only in what was acquired, as in Gal, Islam &
Ghahramani 2017), or ``warm=True`` passes the last round's pair to ``fit`` to go on from. The
oracle is the pool's labels, known in advance (an experiment); a pool row is acquired once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from ..metrics import acquisition_scores, batch_bald, check_acquisition
from ..ops import check_seed, is_positive_int
from .pool import PoolDraws

__all__ = ["ActiveLearner", "balanced_start"]


def balanced_start(y: torch.Tensor, per_class: int, seed: int = 0) -> torch.Tensor:
    """``per_class`` random rows of each class of ``y`` (the paper's 20 initial labels: 2 of each
    of MNIST's 10 digits), their indices sorted."""
    if not is_positive_int(per_class):
        raise ValueError(f"balanced_start: per_class must be a positive int, got {per_class!r}")
    y = _class_labels(y, "balanced_start")
    g = torch.Generator().manual_seed(check_seed(seed, "balanced_start"))
    chosen = []
    for c in torch.unique(y):
        rows = torch.nonzero(y == c).flatten()
        if len(rows) < per_class:
            raise ValueError(f"balanced_start: class {int(c)} has {len(rows)} rows, fewer than {per_class}")
        chosen.append(rows[torch.randperm(len(rows), generator=g)[:per_class]])
    return torch.cat(chosen).sort().values


def _class_labels(y: Any, where: str) -> torch.Tensor:
    """``y`` as class indices ``[N]``: one-hot rows or fractional labels are refused, named."""
    y = torch.as_tensor(y)
    if y.dim() != 1:
        raise ValueError(
            f"{where}: labels must be class indices [N], got shape {tuple(y.shape)}"
            + (" (one-hot rows? pass y.argmax(-1))" if y.dim() == 2 else "")
        )
    if y.is_floating_point() and not bool((y == y.round()).all()):
        raise ValueError(f"{where}: labels must be whole class indices, got fractional values")
    return y.long()


def _rows(rows: Any, n: int, where: str) -> torch.Tensor:
    """``rows`` as indices of a pool of ``n`` rows: integers, in range, each once, at least one."""
    t = torch.as_tensor(rows)
    if t.dim() != 1 or len(t) == 0:
        raise ValueError(f"{where}: expected a list of row indices, got shape {tuple(t.shape)}")
    if t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:
        raise ValueError(f"{where}: row indices must be integers, got {t.dtype} ({t[:3].tolist()}...)")
    if bool((t < 0).any()) or bool((t >= n).any()):
        raise ValueError(
            f"{where}: row indices must lie in [0, {n}) (no negative index), got {t.tolist()[:5]}..."
        )
    if len(torch.unique(t)) != len(t):
        raise ValueError(f"{where}: a row index appears more than once")
    return t.long()


@dataclass
class ActiveLearner:
    """Pool-based active learning with MC-dropout draws (see the module's docs). ``acquisition``:
    one of :data:`~pyro_dropout.metrics.ACQUISITIONS` or ``"batch_bald"``; ``k`` rows a round;
    ``subset``: score a random subset of that many pool rows each round (the common shortcut on
    large pools), else the whole pool; ``num_samples`` draws, the same for every pool row."""

    fit: Callable[..., tuple[Any, Any]]
    x_pool: torch.Tensor
    y_pool: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    acquisition: str = "bald"
    k: int = 10
    num_samples: int = 20
    initial: torch.Tensor | None = None
    subset: int | None = None
    warm: bool = False
    seed: int = 0
    batch_size: int = 1024
    labelled: torch.Tensor = field(init=False)
    history: list[dict[str, float]] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        if len(self.x_pool) != len(self.y_pool) or len(self.x_test) != len(self.y_test):
            raise ValueError(
                "ActiveLearner: the pool's and the test set's inputs and labels must have one row each"
            )
        for name in ("k", "batch_size"):
            if not is_positive_int(getattr(self, name)):
                raise ValueError(f"ActiveLearner: {name} must be a positive int, got {getattr(self, name)!r}")
        if not is_positive_int(self.num_samples) or self.num_samples < 2:
            raise ValueError(f"ActiveLearner: num_samples must be an int >= 2, got {self.num_samples!r}")
        if self.subset is not None and not is_positive_int(self.subset):
            raise ValueError(f"ActiveLearner: subset must be a positive int or None, got {self.subset!r}")
        check_seed(self.seed, "ActiveLearner")
        if self.acquisition != "batch_bald":
            check_acquisition(self.acquisition)
        self.y_pool = _class_labels(self.y_pool, "ActiveLearner (y_pool)")
        start = balanced_start(self.y_pool, 2, self.seed) if self.initial is None else self.initial
        self.labelled = _rows(start, len(self.x_pool), "ActiveLearner (initial)")
        self.pair: tuple[Any, Any] | None = None
        self.generator = torch.Generator().manual_seed(self.seed)

    def train(self) -> float:
        """Train on the labelled rows and return the test error (of the MC predictive's arg-max)."""
        rows = self.labelled
        last = self.pair if self.warm else None
        self.pair = self.fit(self.x_pool[rows], self.y_pool[rows], *(() if last is None else (last,)))
        draws = PoolDraws(*self.pair, self.x_test, self.num_samples, self.seed)
        probs = torch.cat(list(draws.stream(_parts(self.x_test, self.batch_size))), dim=1)
        return float((probs.mean(0).argmax(-1) != self.y_test).float().mean())

    def acquire(self) -> torch.Tensor:
        """The pool rows the acquisition picks this round (never one already labelled)."""
        assert self.pair is not None, "train() first"
        free = torch.ones(len(self.x_pool), dtype=torch.bool)
        free[self.labelled] = False
        candidates = torch.nonzero(free).flatten()
        if self.subset is not None and self.subset < len(candidates):
            candidates = candidates[torch.randperm(len(candidates), generator=self.generator)[: self.subset]]
        draws = PoolDraws(
            *self.pair, self.x_pool[candidates[:2]], self.num_samples, self.seed + len(self.history)
        )
        probs = torch.cat(list(draws.stream(_parts(self.x_pool[candidates], self.batch_size))), dim=1)
        k = min(self.k, len(candidates))
        if self.acquisition == "batch_bald":
            picked, _ = batch_bald(probs.double(), k, generator=self.generator)
        else:
            scores = acquisition_scores(self.acquisition, probs, self.generator)
            picked = scores.topk(k).indices
        return candidates[picked]

    def round(self) -> dict[str, float]:
        """One round: train, record the test error, acquire ``k`` rows (the oracle labels them)."""
        if len(self.labelled) >= len(self.x_pool):
            raise ValueError(
                f"ActiveLearner: every row of the pool ({len(self.x_pool)}) is labelled: no round is left"
            )
        error = self.train()
        entry = {"labelled": float(len(self.labelled)), "error": error}
        self.history.append(entry)
        self.labelled = torch.cat([self.labelled, self.acquire()])
        return entry

    def run(self, rounds: int) -> list[dict[str, float]]:
        """``rounds`` rounds; the history of every round so far."""
        if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 0:
            raise ValueError(f"ActiveLearner.run: rounds must be a whole number >= 0, got {rounds!r}")
        for _ in range(rounds):
            self.round()
        return self.history


def _parts(x: torch.Tensor, size: int) -> list[tuple[torch.Tensor]]:
    return [(x[i : i + size],) for i in range(0, len(x), size)]
