r"""Minibatch training of many independent runs as one vectorised model, for inputs of any shape."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from pyro_dropout.infer import DivergenceError

from .checkpoint import TrainingCheckpoint
from .progress import Progress

__all__ = ["Standardiser", "train_runs"]


@dataclass
class Standardiser:
    """Per-run standardisation with the training statistics (a zero std counts as one)."""

    x_mean: torch.Tensor  # [R, ...] (the shape of one input)
    x_std: torch.Tensor
    y_mean: torch.Tensor  # [R]
    y_std: torch.Tensor  # [R]

    @classmethod
    def fit(cls, x: torch.Tensor, y: torch.Tensor) -> Standardiser:
        """``x`` ``[R, n, ...]``, ``y`` ``[R, n]`` (population standard deviations)."""
        x_std = x.std(1, unbiased=False)
        y_std = y.std(1, unbiased=False)
        return cls(
            x.mean(1),
            torch.where(x_std > 0, x_std, torch.ones_like(x_std)),
            y.mean(1),
            torch.where(y_std > 0, y_std, torch.ones_like(y_std)),
        )

    def x(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.x_mean.unsqueeze(1)) / self.x_std.unsqueeze(1)

    def y(self, y: torch.Tensor) -> torch.Tensor:
        return (y - self.y_mean.unsqueeze(1)) / self.y_std.unsqueeze(1)


def _batches(n: int, batch_size: int, runs: int, generator: torch.Generator) -> Iterator[torch.Tensor]:
    """One epoch: a fresh permutation per run, cut into batches (the last may be smaller)."""
    order = torch.argsort(torch.rand(runs, n, generator=generator), dim=1)
    for start in range(0, n, batch_size):
        yield order[:, start : start + batch_size]


def _resume(checkpoint: TrainingCheckpoint, x: torch.Tensor, y: torch.Tensor, epochs: int, batch: int) -> Any:
    saved = checkpoint.load()
    if saved is None:
        return None
    done = len(saved["history"])
    if done > epochs:
        raise ValueError(f"{checkpoint.path} has {done} epochs of training; this training has {epochs}")
    checkpoint.svi.setup(x[:, :batch], y[:, :batch], num_data=x.shape[1])  # create the parameters
    checkpoint.svi.load_state_dict(saved["svi"])
    checkpoint.earlier = float(saved["seconds"])
    return saved


def _epoch(
    step: Callable[..., float], x: torch.Tensor, y: torch.Tensor, batch: int, g: torch.Generator, where: str
) -> float:
    """One epoch's mean loss; a divergence names ``where`` (the training and the epoch)."""
    try:
        return _steps(step, x, y, batch, g)
    except DivergenceError as e:
        raise DivergenceError(f"{where}: {e}") from None


def _steps(
    step: Callable[..., float], x: torch.Tensor, y: torch.Tensor, batch: int, g: torch.Generator
) -> float:
    runs, n = x.shape[:2]
    rows = torch.arange(runs, device=x.device).unsqueeze(-1)
    total, count = 0.0, 0
    for idx in _batches(n, batch, runs, g):
        idx = idx.to(x.device)
        total += step(x[rows, idx], y[rows, idx], num_data=n)
        count += 1
    return total / count


def _save(
    checkpoint: TrainingCheckpoint,
    g: torch.Generator,
    history: list[float],
    seconds: float,
    epochs: int,
    desc: str,
) -> None:
    state = {"svi": checkpoint.svi.state_dict(), "batches": g.get_state(), "history": history}
    checkpoint.save({**state, "seconds": checkpoint.earlier + seconds, "epochs": epochs, "desc": desc})


def train_runs(
    step: Callable[..., float],
    x: torch.Tensor,
    y: torch.Tensor,
    epochs: int,
    batch_size: int = 128,
    seed: int = 0,
    desc: str = "training",
    progress: bool = True,
    on_epoch: Callable[[int], None] | None = None,
    checkpoint: TrainingCheckpoint | None = None,
) -> list[float]:
    """Minibatch training of ``R`` runs at once: ``x`` ``[R, n, ...]``, ``y`` ``[R, n]``.

    ``step(xb, yb, num_data=n)`` is one optimisation step (e.g. ``CompiledSVI.step``); each
    run draws its own batches. ``on_epoch(e)`` is called after epoch ``e`` (1-based), for
    monitoring; it must not draw random numbers, or training changes. With a ``checkpoint``
    (whose ``svi`` owns ``step``), training resumes from its file if there is one and keeps
    its state there as it goes. Returns the mean loss of each epoch."""
    if epochs < 1 or batch_size < 1:
        raise ValueError(f"train_runs: epochs and batch_size must be >= 1, got {epochs} and {batch_size}")
    if x.dim() < 3 or y.shape[:2] != x.shape[:2]:
        shapes = f"{tuple(x.shape)}, {tuple(y.shape)}"
        raise ValueError(f"train_runs: x must be [R, n, ...] and y [R, n]; got {shapes}")
    g = torch.Generator().manual_seed(seed)
    saved = None if checkpoint is None else _resume(checkpoint, x, y, epochs, batch_size)
    history: list[float] = [] if saved is None else list(saved["history"])
    if saved is not None:
        g.set_state(saved["batches"])
    start = last_saved = time.monotonic()
    with Progress(
        initial=len(history), total=epochs, desc=desc, disable=not progress, leave=False, mininterval=2.0
    ) as bar:
        for _ in range(len(history), epochs):
            history.append(_epoch(step, x, y, batch_size, g, f"{desc}, epoch {len(history) + 1} of {epochs}"))
            due = len(history) == epochs or time.monotonic() - last_saved >= getattr(checkpoint, "every", 0.0)
            if checkpoint is not None and due:
                _save(checkpoint, g, history, time.monotonic() - start, epochs, desc)
                last_saved = time.monotonic()
            if on_epoch is not None:
                on_epoch(len(history))
            bar.set_postfix(loss=f"{history[-1]:.4g}", refresh=False)
            bar.update()
    return history
