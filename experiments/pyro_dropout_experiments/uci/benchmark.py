"""Running the UCI protocol for a method on a data set's splits, resumable from its results folder."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from .method import Method
from .protocol import UCIProtocol
from .registry import get_method
from .resume import read_kept
from .settings import Settings, UCIBenchmark

__all__ = ["load_results", "run_uci"]


def _check_splits(bench: UCIBenchmark, splits: list[int]) -> None:
    bad = [i for i in splits if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < bench.n_splits]
    if bad:
        raise ValueError(f"{bench.name} has splits 0-{bench.n_splits - 1}; got {bad}")
    twice = sorted({i for i in splits if splits.count(i) > 1})
    if twice:
        raise ValueError(f"splits {twice} are given more than once")


def run_uci(
    bench: UCIBenchmark,
    method: str | Method,
    splits: Sequence[int] | None = None,
    out: Path | None = None,
    settings: Settings | None = None,
    log: Callable[[str], None] = print,
) -> list[dict[str, Any]]:
    """Run the protocol for ``method`` (a registered name, or a :class:`Method` with its options)
    on ``splits`` (default: all); one JSON file per split in ``out``.

    Splits whose result file exists are kept (the run is resumable) if they were made with the
    same settings (else an error). Each split's grid search is written as soon as it ends, and a
    group's training state every five minutes (``*.train.pt``), so a stopped run resumes within
    minutes of where it stood. Returns the results of the splits run now and of those kept."""
    m = get_method(method) if isinstance(method, str) else method
    s = settings or Settings()
    splits = list(range(bench.n_splits)) if splits is None else list(splits)
    _check_splits(bench, splits)
    protocol = UCIProtocol(bench, m, s, out, log)
    if not s.retrain and not protocol.grid:
        raise ValueError(f"{m.name!r} has no grid search, so no grid network to score")
    paths = {i: protocol.path(i) for i in splits}
    kept = read_kept(paths, s, m, bench)
    todo = [i for i in splits if i not in kept]
    if kept:
        log(f"{bench.name} {m.name}: keeping finished splits {sorted(kept)}")
    if not todo:
        return [kept[i] for i in splits]
    # networks train all splits together; a method fitted split by split (HMC) keeps each as it ends
    results: dict[int, dict[str, Any]] = {}
    for group in [[i] for i in todo] if m.fits_splits else [todo]:
        results.update(_run_group(protocol, group, log))
    return [kept.get(i) or results[i] for i in splits]


def _run_group(
    protocol: UCIProtocol, todo: list[int], log: Callable[[str], None]
) -> dict[int, dict[str, Any]]:
    """Run ``todo``'s splits together and write each one's result."""
    start = time.perf_counter()
    before = 0.0 if protocol.checkpoints is None else protocol.checkpoints.resumed_seconds
    results = protocol.run_stages(todo)
    # a grid search or a training resumed from its checkpoint ran in part in an earlier process
    seconds = time.perf_counter() - start + sum({results[i].get("resumed_grid_seconds", 0.0) for i in todo})
    resumed = 0.0 if protocol.checkpoints is None else protocol.checkpoints.resumed_seconds - before
    seconds += resumed
    for i in todo:
        _record(protocol, i, results[i], seconds, len(todo), resumed)
    what = f"split {todo[0]}" if len(todo) == 1 else f"{len(todo)} splits"
    log(f"{protocol.bench.name} {protocol.method.name}: {what} in {seconds:.1f} s")
    return results


def _record(
    protocol: UCIProtocol, split: int, result: dict[str, Any], seconds: float, together: int, resumed: float
) -> None:
    """Complete a split's result with what ran and how long, and write it (its grid file goes)."""
    result.update(
        dataset=protocol.bench.name,
        method=protocol.method.name,
        split=split,
        seconds=seconds / together,
        protocol_seconds=seconds,
        splits_run_together=together,
        threads=torch.get_num_threads(),  # PyTorch's CPU threads, for reading the wall time
        resumed_training_seconds=resumed,
        settings=protocol.stored_settings(),
    )
    path = protocol.path(split)
    if path is not None and protocol.store is not None:
        protocol.store.write(path, result)
        grid = protocol.path(split, grid=True)  # the result holds the grid search too
        if grid is not None:
            grid.unlink(missing_ok=True)


def load_results(out: Path, bench_name: str, name: str, splits: Sequence[int]) -> list[dict[str, Any]]:
    """The stored results of ``splits`` (``name``: a table label such as ``mc-dropout-per-draw``)."""
    from ..core.store import ResultStore

    store, rows = ResultStore(out), []
    for i in splits:
        path = store.result_path(bench_name, name, i)
        if not path.is_file():
            raise FileNotFoundError(f"no result file {path}; run `pyro-dropout uci` for split {i} first")
        rows.append(store.read_result(path))
    return rows
