r"""The results store: where each result, finished grid search and checkpoint lives, and the
versioned JSON schema of what is written there.

Files are written atomically, one JSON object each, stamped with ``schema_version``; a file is
read back only after its fields are checked, and a truncated, empty or foreign file is an error
that names it (and how to start over), never a ``KeyError`` deep in a table.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .atomic import write_atomically

__all__ = [
    "GRID_FIELDS",
    "GRID_SUFFIX",
    "RESULT_FIELDS",
    "SCHEMA_VERSION",
    "ResultStore",
    "is_result_file",
    "read_record",
    "write_record",
]

SCHEMA_VERSION = 2  # 1: files written before the field existed (read the same way)
GRID_SUFFIX = ".grid.json"  # a split's finished grid search, kept until its result is written
CHECKPOINT_SUFFIX = ".train.pt"
# what every file must hold, and the type of each field (float fields may be null only where said)
RESULT_FIELDS: dict[str, tuple[type, ...]] = {
    "dataset": (str,),
    "method": (str,),
    "split": (int,),
    "rmse": (float, int),
    "test_ll": (float, int),
}
GRID_FIELDS: dict[str, tuple[type, ...]] = {
    "dataset": (str,),
    "method": (str,),
    "split": (int,),
    "validation": (list,),
}


def _fail(path: Path, what: str) -> ValueError:
    return ValueError(f"{path}: {what}; remove the file to run it again")


MAX_BYTES = 256 * 2**20  # a kept JSON file larger than this is not one this project wrote


def _refuse_constant(name: str) -> float:
    raise ValueError(name)


def _text(path: Path) -> str:
    """A kept file's text: a regular file (not a link, a FIFO or a device) of a sane size."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such file") from None
    if not stat.S_ISREG(info.st_mode):
        raise _fail(path, "not a regular file (a link, a FIFO or a device)")
    if info.st_size > MAX_BYTES:
        raise _fail(path, f"{info.st_size / 2**20:.0f} MiB, larger than any results file this project writes")
    return path.read_text()


def read_record(path: Path, required: dict[str, tuple[type, ...]], finite: bool = False) -> dict[str, Any]:
    """The JSON object in ``path`` with ``required`` fields of the right types; else an error
    naming the file and what is wrong with it. ``finite``: a NaN or an infinity anywhere in it
    is an error too (the file was edited: this project's commands never write one there)."""
    try:
        text = _text(path)
    except UnicodeDecodeError:
        raise _fail(path, "not a text file") from None
    try:
        record = json.loads(text, parse_constant=_refuse_constant if finite else None)
    except RecursionError:
        raise _fail(path, "nested too deeply to be a results file") from None
    except json.JSONDecodeError as e:
        raise _fail(path, f"not valid JSON ({e.msg} at line {e.lineno}, column {e.colno})") from None
    except ValueError as e:  # a NaN or an infinity, where ``finite``
        raise _fail(path, f"holds {e} (results are finite numbers)") from None
    if not isinstance(record, dict):
        raise _fail(path, f"expected a JSON object, found a {type(record).__name__}")
    version = record.get("schema_version", 1)
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise _fail(path, f"written by a newer version (schema {version!r}; this one reads {SCHEMA_VERSION})")
    for key, kinds in required.items():
        if key not in record:
            raise _fail(path, f"no field {key!r} (a foreign or truncated result file?)")
        value = record[key]
        if isinstance(value, bool) or not isinstance(value, kinds):
            raise _fail(path, f"field {key!r} is {value!r}, not of type {kinds[0].__name__}")
        if isinstance(value, float) and not math.isfinite(value) and key != "test_ll":
            raise _fail(path, f"field {key!r} is {value!r}")
    return record


def write_record(path: Path, record: dict[str, Any]) -> None:
    """Write ``record`` (stamped with ``schema_version``) atomically: a stop leaves the old file."""
    write_atomically(path, json.dumps({"schema_version": SCHEMA_VERSION, **record}, indent=1))


@dataclass
class ResultStore:
    """A results folder: ``DATASET_LABEL_splitNN.json`` per split (``LABEL``: the method with its
    variants), ``...splitNN.grid.json`` for a finished grid search waiting for its final model,
    and ``DATASET_METHOD_KEY.train.pt`` for a training in progress."""

    folder: Path

    def result_path(self, dataset: str, label: str, split: int) -> Path:
        return self.folder / f"{dataset}_{label}_split{split:02d}.json"

    def grid_path(self, dataset: str, label: str, split: int) -> Path:
        return self.result_path(dataset, label, split).with_suffix(GRID_SUFFIX)

    def checkpoint_path(self, dataset: str, method: str, key: str) -> Path:
        return self.folder / f"{dataset}_{method}_{key[:16]}{CHECKPOINT_SUFFIX}"

    def read_result(self, path: Path) -> dict[str, Any]:
        return read_record(path, RESULT_FIELDS)

    def read_grid(self, path: Path) -> dict[str, Any]:
        return read_record(path, GRID_FIELDS)

    def write(self, path: Path, record: dict[str, Any]) -> None:
        write_record(path, record)

    def results(self) -> list[Path]:
        """Every finished per-split result under the folder (grid searches left out)."""
        return sorted(f for f in self.folder.rglob("*.json") if is_result_file(f))

    def checkpoints(self) -> list[Path]:
        return sorted(self.folder.glob(f"*{CHECKPOINT_SUFFIX}"))

    def grids(self) -> list[Path]:
        return sorted(self.folder.glob(f"*{GRID_SUFFIX}"))

    def kept(self, paths: Iterable[tuple[int, Path | None]], grid: bool = False) -> dict[int, dict[str, Any]]:
        """The finished files among ``paths`` (``(split, path)``), read and checked."""
        read = self.read_grid if grid else self.read_result
        return {i: read(p) for i, p in paths if p is not None and p.is_file()}


def is_result_file(path: Path) -> bool:
    """A per-split result (``DATASET_LABEL_splitNN.json``), not a split's finished grid search
    waiting for its final model nor another command's file."""
    return re.fullmatch(r".+_split\d{2,}\.json", path.name) is not None
