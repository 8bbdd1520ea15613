r"""Train and score many independent runs as one vectorised model (``MLP(runs=R)``)."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

from ..infer import CompiledSVI, predict

__all__ = ["RunScores", "Standardiser", "TrainingCheckpoint", "dropout_draws", "score_runs", "train_runs"]


@dataclass
class Standardiser:
    """Per-run standardisation with the training statistics (a zero std counts as one)."""

    x_mean: torch.Tensor  # [R, d]
    x_std: torch.Tensor  # [R, d]
    y_mean: torch.Tensor  # [R]
    y_std: torch.Tensor  # [R]

    @classmethod
    def fit(cls, x: torch.Tensor, y: torch.Tensor) -> Standardiser:
        """``x`` ``[R, n, d]``, ``y`` ``[R, n]`` (population standard deviations)."""
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


@dataclass
class TrainingCheckpoint:
    """Where :func:`train_runs` keeps the state of a long training, so that a stopped process
    resumes it: ``svi``'s parameters, optimizer and random state (``CompiledSVI.state_dict``),
    the batch order's random state, and the losses so far.

    The state is written to ``path`` every ``every`` seconds of training and after the last
    epoch (atomically: a stop while writing leaves the previous state). ``key`` names what is
    being trained (the caller's choice, e.g. a hash of the runs and settings); a file with
    another key is an error, not a silent restart. Resuming from it gives the parameters an
    unstopped training would have reached, exactly (``tests/experiments/test_uci.py``).
    """

    path: Path
    svi: CompiledSVI
    key: str
    every: float = 300.0
    earlier: float = 0.0  # seconds of training the loaded state had cost (set by train_runs)

    def load(self) -> dict[str, Any] | None:
        if not self.path.is_file():
            return None
        state = torch.load(self.path, map_location="cpu", weights_only=False)
        if state.get("key") != self.key:
            raise ValueError(
                f"{self.path} holds the training of other runs or settings (key {state.get('key')!r}, "
                f"expected {self.key!r}); remove it to train these from the start"
            )
        return state

    def save(self, state: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_name(self.path.name + ".partial")
        torch.save({**state, "key": self.key}, partial)
        os.replace(partial, self.path)

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


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
    """Minibatch training of ``R`` runs at once: ``x`` ``[R, n, d]``, ``y`` ``[R, n]``.

    ``step(xb, yb, num_data=n)`` is one optimisation step (e.g. ``CompiledSVI.step``); each
    run draws its own batches. ``on_epoch(e)`` is called after epoch ``e`` (1-based), for
    monitoring; it must not draw random numbers, or training changes. With a ``checkpoint``
    (whose ``svi`` owns ``step``), training resumes from its file if there is one and keeps
    its state there as it goes. Returns the mean loss of each epoch.
    """
    runs, n, d = x.shape
    g = torch.Generator().manual_seed(seed)
    history: list[float] = []
    saved = None if checkpoint is None else checkpoint.load()
    if saved is not None:
        assert checkpoint is not None
        if len(saved["history"]) > epochs:
            done = len(saved["history"])
            raise ValueError(f"{checkpoint.path} has {done} epochs of training; this training has {epochs}")
        checkpoint.svi.setup(x[:, :batch_size], y[:, :batch_size], num_data=n)  # create the parameters
        checkpoint.svi.load_state_dict(saved["svi"])
        g.set_state(saved["batches"])
        history = list(saved["history"])
        checkpoint.earlier = float(saved["seconds"])
    start = last_saved = time.monotonic()
    bar = tqdm(
        range(len(history), epochs),
        initial=len(history),
        total=epochs,
        desc=desc,
        disable=not progress,
        leave=False,
        mininterval=2.0,
    )
    for _ in bar:
        total, count = 0.0, 0
        for idx in _batches(n, batch_size, runs, g):
            idx = idx.to(x.device)
            xb = x.gather(1, idx.unsqueeze(-1).expand(-1, -1, d))
            yb = y.gather(1, idx)
            total += step(xb, yb, num_data=n)
            count += 1
        history.append(total / count)
        if checkpoint is not None and (
            len(history) == epochs or time.monotonic() - last_saved >= checkpoint.every
        ):
            state = {
                "svi": checkpoint.svi.state_dict(),
                "batches": g.get_state(),
                "history": history,
                "seconds": checkpoint.earlier + time.monotonic() - start,
                "epochs": epochs,
                "desc": desc,
            }
            checkpoint.save(state)
            last_saved = time.monotonic()
        if on_epoch is not None:
            on_epoch(len(history))
        bar.set_postfix(loss=f"{history[-1]:.4g}", refresh=False)
    return history


@dataclass
class RunScores:
    """Per-run scores of a predictive on original-scale targets (one entry per run)."""

    rmse: torch.Tensor  # [R] of the predictive mean
    test_ll: torch.Tensor  # [R] mean over points of log (1/T) sum_t N(y; mu_t, v_t)
    coverage: dict[float, torch.Tensor]  # level -> [R]
    mean: torch.Tensor  # [R, m] predictive mean


def score_runs(
    draws: Callable[[int], tuple[torch.Tensor, torch.Tensor]],
    y: torch.Tensor,
    num_samples: int,
    chunk_size: int = 100,
    levels: tuple[float, ...] = (0.5, 0.9, 0.95),
) -> RunScores:
    r"""Score a Gaussian-mixture predictive from draws made chunk by chunk.

    ``draws(c)`` returns the means and variances of ``c`` draws of the likelihood, shape
    ``[c, R, m]``, **on the scale of** ``y`` (``[R, m]``). Accumulates the mean, the
    log-sum-exp of the per-draw log-densities (paper 000 eq. 13 when the variance is
    :math:`\tau^{-1}`) and the mixture CDF at ``y``, so memory does not grow with
    ``num_samples``.
    """
    total_mean = torch.zeros_like(y, dtype=torch.float64)
    running_max = torch.full_like(y, -math.inf, dtype=torch.float64)
    running_sum = torch.zeros_like(y, dtype=torch.float64)
    cdf = torch.zeros_like(y, dtype=torch.float64)
    done = 0
    while done < num_samples:
        c = min(chunk_size, num_samples - done)
        mu, var = (t.double() for t in draws(c))
        log_p = -0.5 * ((y - mu).pow(2) / var + var.log() + math.log(2 * math.pi))
        new_max = torch.maximum(running_max, log_p.max(0).values)
        running_sum = running_sum * torch.exp(running_max - new_max) + torch.exp(log_p - new_max).sum(0)
        running_max = new_max
        total_mean += mu.sum(0)
        cdf += (0.5 * (1 + torch.erf((y - mu) / (2 * var).sqrt()))).sum(0)
        done += c
    mean = total_mean / num_samples
    ll = running_max + running_sum.log() - math.log(num_samples)
    u = cdf / num_samples
    return RunScores(
        rmse=(mean - y).pow(2).mean(-1).sqrt(),
        test_ll=ll.mean(-1),
        coverage={level: ((u - 0.5).abs() <= level / 2).double().mean(-1) for level in levels},
        mean=mean,
    )


def draws_per_chunk(limit: int, runs: int, rows: int, width: int, budget_mb: float) -> int:
    """How many prediction draws to make at once so that one chunk stays within ``budget_mb``.

    A draw of an MLP over ``rows`` points in each of ``runs`` runs holds a ``[runs, rows,
    width]`` activation (``width``: the widest layer); measured peak memory is about 1.2x its
    size in float32, and this allows 2x. At least one draw, at most ``limit``.
    """
    per_draw = 2 * runs * rows * max(width, 1) * 4
    return max(1, min(limit, int(budget_mb * 2**20) // per_draw))


def dropout_draws(
    model: Callable, guide: Callable, x: torch.Tensor, y_mean: torch.Tensor, y_std: torch.Tensor
) -> Callable[[int], tuple[torch.Tensor, torch.Tensor]]:
    """Draws of the likelihood's mean and variance on the original scale, for :func:`score_runs`.

    ``x`` is standardised ``[R, m, d]``; ``y_mean``/``y_std`` are the per-run statistics.
    """

    def draw(c: int) -> tuple[torch.Tensor, torch.Tensor]:
        pred = predict(model, guide, x, num_samples=c, chunk_size=c, return_sites=())
        mu, var = pred.means["obs"], pred.variances["obs"]
        scale = y_std.unsqueeze(-1)
        return mu * scale + y_mean.unsqueeze(-1), var * scale.pow(2)

    return draw
