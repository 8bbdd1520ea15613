r"""The one owner of the training-checkpoint format (``*.train.pt``).

A checkpoint holds tensors and plain data only (numbers, strings, lists, dicts) and is read
with ``torch.load(..., weights_only=True)``: a file in a results folder may come from anyone,
and unpickling it would run whatever it says. Random states that are not tensors (NumPy's) are
stored as tensors and rebuilt on load. A file that does not load, or that holds another
training, is an error naming the file and how to start over.
"""

from __future__ import annotations

import pickle
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .atomic import replace_atomically

__all__ = ["FORMAT", "Checkpoints", "TrainingCheckpoint", "read_checkpoint"]

FORMAT = 2  # version of the checkpoint layout; 1 was pickled with NumPy arrays inside
_ARRAY = "__ndarray__"


def _plain(value: Any) -> Any:
    """``value`` with every NumPy array (and tuple) turned into something ``weights_only`` loads."""
    if isinstance(value, np.ndarray):
        return {_ARRAY: torch.from_numpy(value.copy()), "dtype": str(value.dtype)}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_plain(v) for v in value)
    return value


def _restore(value: Any) -> Any:
    if isinstance(value, dict):
        if _ARRAY in value:
            return value[_ARRAY].numpy().astype(value["dtype"])
        return {k: _restore(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_restore(v) for v in value)
    return value


def read_checkpoint(path: Path) -> dict[str, Any]:
    """The state in ``path``, loaded without unpickling code; a clear error if it cannot be."""
    try:
        with warnings.catch_warnings():  # a foreign pickle's protocol warning: the error below says it
            warnings.simplefilter("ignore", UserWarning)
            state = torch.load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, OSError, ValueError, AttributeError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ValueError(
            f"{path} is not a training checkpoint this version can read safely ({first}); "
            "remove it to train from the start"
        ) from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise ValueError(
            f"{path} is not a training checkpoint of format {FORMAT}; remove it to train from the start"
        )
    return dict(_restore(state))


@dataclass
class Checkpoints:
    """Where training keeps its state as it goes, and how often (seconds);
    ``resumed_seconds`` adds up the training time that the trainings resumed from there had
    spent in the processes that were stopped, up to their last checkpoint."""

    folder: Path
    every: float = 300.0
    resumed_seconds: float = 0.0


@dataclass
class TrainingCheckpoint:
    """Where :func:`~pyro_dropout_experiments.core.train_runs` keeps the state of a long training,
    so that a stopped process resumes it: the SVI state (``CompiledSVI.state_dict``), the batch
    order's random state and the losses so far.

    Written to ``path`` every ``every`` seconds and after the last epoch (atomically: a stop while
    writing leaves the previous state). ``key`` names what is trained (e.g. a hash of the runs and
    settings); a file with another key is an error, not a silent restart. Resuming gives the
    parameters an unstopped training would have reached, exactly."""

    path: Path
    svi: Any
    key: str
    every: float = 300.0
    earlier: float = 0.0  # seconds of training the loaded state had cost (set by train_runs)

    def load(self) -> dict[str, Any] | None:
        if not self.path.is_file():
            return None
        state = read_checkpoint(self.path)
        if state.get("key") != self.key:
            raise ValueError(
                f"{self.path} holds the training of other runs or settings (key {state.get('key')!r}, "
                f"expected {self.key!r}); remove it to train these from the start"
            )
        return state

    def save(self, state: dict[str, Any]) -> None:
        plain = _plain({**state, "key": self.key, "format": FORMAT})
        replace_atomically(self.path, lambda temporary: torch.save(plain, temporary))

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)
