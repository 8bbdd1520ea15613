r"""What every data set is: tensors of inputs and targets, named splits, and a task.

Index files come from outside and are read as untrusted data (:func:`read_indices`): a negative
index would wrap around in Python and put test rows in training, so every index is checked to
be a whole number inside the data, with no duplicates.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np

__all__ = ["Dataset", "Split", "Task", "read_indices", "read_scalar"]

Task = Literal["regression", "classification"]
"""What a data set's target is: a real number, or a class index."""


@dataclass
class Split:
    """One train/test split: 0-based row indices into the data set."""

    train: np.ndarray
    test: np.ndarray


@dataclass
class Dataset:
    """Inputs ``x`` ``[n, ...]`` (a row per example: features, an image, a sequence), targets
    ``y`` ``[n]`` (real numbers, or class labels ``0..C-1``), and named splits of its rows."""

    name: str
    x: np.ndarray
    y: np.ndarray
    splits: list[Split]
    task: Task = "regression"
    files: dict[str, Path] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.task not in ("regression", "classification"):
            raise ValueError(f"{self.name}: task must be 'regression' or 'classification', got {self.task!r}")
        if len(self.x) != len(self.y):
            raise ValueError(f"{self.name}: {len(self.x)} rows of inputs but {len(self.y)} targets")

    @property
    def n_splits(self) -> int:
        return len(self.splits)


def _numbers(path: Path) -> np.ndarray:
    """The numbers in a text file, one per line."""
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # numpy's "input contained no data"
        try:
            return np.loadtxt(path, ndmin=1)
        except ValueError as e:
            raise ValueError(f"{path}: not a list of numbers ({e})") from None


def read_scalar(path: Path, kind: type = float, minimum: float | None = None) -> float:
    """The one number in ``path`` (``kind`` int: a whole number), at least ``minimum``."""
    values = _numbers(path)
    if values.size != 1:
        raise ValueError(f"{path}: expected one number, found {values.size}")
    value = float(values[0])
    if kind is int and value != int(value):
        raise ValueError(f"{path}, line 1: expected a whole number, found {value!r}")
    if minimum is not None and not value >= minimum:
        raise ValueError(f"{path}, line 1: expected at least {minimum:g}, found {value!r}")
    return int(value) if kind is int else value


def read_indices(path: Path, n_rows: int, allow_empty: bool = False, unit: str = "rows") -> np.ndarray:
    """0-based row indices from ``path``, checked as data from outside: whole numbers in
    ``[0, n_rows)``, no duplicates, not empty (unless ``allow_empty``). Errors name the file
    and the line (``unit``: what the indices count, for the message)."""
    values = _numbers(path)
    if values.size == 0 and not allow_empty:
        raise ValueError(f"{path}: no indices (the file is empty)")
    checks = (
        (~np.isfinite(values) | (values != np.round(values)), "is not a whole number"),
        (values < 0, "is negative (it would wrap around to the last rows)"),
        (values >= n_rows, f"is beyond the {n_rows} {unit} of the data"),
    )
    for bad, what in checks:
        if bad.any():
            line = int(np.flatnonzero(bad)[0])
            raise ValueError(f"{path}, line {line + 1}: index {float(values[line]):g} {what}")
    indices = values.astype(np.int64)
    unique, _first, counts = np.unique(indices, return_index=True, return_counts=True)
    if (counts > 1).any():
        twice = unique[counts > 1][0]
        lines = np.flatnonzero(indices == twice)[:2] + 1
        raise ValueError(f"{path}, lines {lines[0]} and {lines[1]}: index {twice} appears twice")
    return indices
