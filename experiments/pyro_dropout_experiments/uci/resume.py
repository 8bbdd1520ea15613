"""Kept files of the UCI protocol: finished results and grid searches are reused only if they
were made with this run's settings; a file that cannot be read is an error naming it."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Any

import numpy as np

from ..core.options import flatten, unflatten
from ..core.store import GRID_FIELDS, RESULT_FIELDS, read_record
from .method import Method
from .registry import get_method, method_class
from .settings import CHECKED_SETTINGS, LEGACY_SETTINGS, Settings, UCIBenchmark

__all__ = ["DATA_KEY", "check_grid_rows", "data_digest", "method_from_stored", "read_kept"]

DATA_KEY = "data_sha256"  # a result's digest of the data it was made from (files before it: none)


def data_digest(bench: UCIBenchmark) -> str:
    """SHA-256 of what a run reads: the inputs, the targets and every split's rows (as numbers,
    so that a changed value or split is another digest and a reformatted file is not)."""
    h = hashlib.sha256(bench.name.encode())
    arrays = [bench.x, bench.y] + [a for sp in bench.splits for a in (sp.train, sp.test)]
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def _made_with(stored: dict[str, Any], method: Method) -> dict[str, Any]:
    """The checked settings a stored file was made with, as flat keys."""
    shared = Settings.from_stored(stored)
    options: Any = unflatten(method.options_class, stored, method.prefix, legacy=LEGACY_SETTINGS)
    return {**{k: getattr(shared, k) for k in CHECKED_SETTINGS}, **flatten(options, method.prefix)}


def method_from_stored(name: str, stored: dict[str, Any]) -> Method:
    """The method ``name`` with the options a result file's ``settings`` record."""
    cls, _ = method_class(name)
    return get_method(name, unflatten(cls.options_class, stored, cls.prefix, legacy=LEGACY_SETTINGS))


def read_kept(
    paths: dict[int, Path | None], s: Settings, method: Method, bench: UCIBenchmark, grid: bool = False
) -> dict[int, dict[str, Any]]:
    """The finished files among ``paths`` (results, or grid searches with ``grid``), each checked
    to come from this data set's method with this run's settings and data (else an error naming it)."""
    required = GRID_FIELDS if grid else RESULT_FIELDS
    kept = {i: read_record(p, required) for i, p in paths.items() if p is not None and p.exists()}
    now = {**{k: getattr(s, k) for k in CHECKED_SETTINGS}, **flatten(method.options, method.prefix)}
    digest = data_digest(bench) if kept else ""
    for i, stored in kept.items():
        if (stored["dataset"], stored["method"], stored["split"]) != (bench.name, method.name, i):
            raise ValueError(
                f"{paths[i]} holds split {stored['split']} of {stored['method']!r} on {stored['dataset']!r}, "
                f"not split {i} of {method.name!r} on {bench.name!r}; remove it to re-run it"
            )
        settings = stored.get("settings", {})
        made_from = settings.get(DATA_KEY) if isinstance(settings, dict) else None
        if made_from is not None and made_from != digest:
            raise ValueError(
                f"{paths[i]} was made from other data than {bench.name}'s files now hold (a changed "
                "value or split); give another --out folder (or remove the file to re-run it)"
            )
        made = _made_with(stored.get("settings", {}), method)
        for key, value in now.items():
            was = made[key]
            if was != value:
                raise ValueError(
                    f"{paths[i]} was made with {key}={was!r} but this run has {key}={value!r}; "
                    "give another --out folder (or remove the file to re-run it)"
                )
    return kept


def _same_point(row: dict[str, Any], point: dict[str, Any]) -> bool:
    def same(a: Any, b: Any) -> bool:
        numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (a, b))
        return math.isclose(a, b, rel_tol=1e-9) if numbers else a == b

    return all(k in row and same(row[k], v) for k, v in point.items())


def check_grid_rows(path: Path | None, rows: Any, grid: list[dict[str, Any]]) -> None:
    """A kept grid search holds one row per point of this run's ``grid`` and nothing else
    (an empty list, or a row at a point the grid does not have, such as tau = -1 or p = 1.5, is
    an error naming the file)."""
    fix = "remove the file to run its grid search again"
    if not isinstance(rows, list) or not rows or not all(isinstance(r, dict) for r in rows):
        raise ValueError(f"{path}: field 'validation' holds no grid rows ({rows!r:.60}); {fix}")
    for row in rows:
        if not any(_same_point(row, point) for point in grid):
            shown = {k: row.get(k) for k in grid[0]}
            raise ValueError(f"{path}: validation row {shown} is not a point of this run's grid; {fix}")
