"""Shared helpers for the benchmarks: timing, machine description, JSON output."""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from pyro_dropout_experiments.core.atomic import write_atomically

RESULTS = Path(__file__).resolve().parent / "results"


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def best_time(
    fn: Callable[[], Any],
    device: torch.device,
    repeats: int = 5,
    warmup: int = 1,
    clock: Callable[[], float] = time.perf_counter,
) -> float:
    """The fastest of ``repeats`` timed calls (after ``warmup`` calls), in seconds of ``clock``."""
    for _ in range(warmup):
        fn()
    sync(device)
    times = []
    for _ in range(repeats):
        start = clock()
        fn()
        sync(device)
        times.append(clock() - start)
    return min(times)


def interleaved_best(
    runners: dict[Any, Callable[[], Any]],
    device: torch.device,
    steps: int,
    blocks: int,
    clock: Callable[[], float] = time.perf_counter,
    warmup: int = 0,
) -> dict[Any, float]:
    """The best time per call of each runner, in seconds of ``clock``: ``blocks`` rounds in which
    each runner in turn makes ``steps`` calls (so that a slow spell of the machine hits all
    alike), after ``warmup`` rounds of one call each (tracing, the allocator)."""
    return {k: min(v) for k, v in interleaved_times(runners, device, steps, blocks, clock, warmup).items()}


def interleaved_times(
    runners: dict[Any, Callable[[], Any]],
    device: torch.device,
    steps: int,
    blocks: int,
    clock: Callable[[], float] = time.perf_counter,
    warmup: int = 0,
) -> dict[Any, list[float]]:
    """The time per call of each runner in each of ``blocks`` interleaved rounds (as
    :func:`interleaved_best`, which keeps the fastest), for medians and minimums."""
    for _ in range(warmup):
        for run in runners.values():
            run()
    times: dict[Any, list[float]] = {key: [] for key in runners}
    for _ in range(blocks):
        for key, run in runners.items():
            seconds = best_time(lambda run=run: [run() for _ in range(steps)], device, 1, 0, clock)
            times[key].append(seconds / steps)
    return times


def work_clock(device: torch.device) -> tuple[Callable[[], float], str]:
    """The clock for comparing two implementations on a shared machine, and its name.

    On CPU, this process's CPU time: other jobs on the machine then change it much less than
    wall time (they still share caches and memory bandwidth); on a GPU, wall time after a sync.
    """
    if device.type == "cpu":
        return time.process_time, "process CPU time"
    return time.perf_counter, "wall time"


def machine(device: torch.device) -> dict[str, Any]:
    info = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
        "device": str(device),
    }
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
    return info


def write(name: str, payload: dict[str, Any]) -> Path:
    """Write ``payload`` to ``benchmarks/results/NAME.json`` atomically. An earlier run's file is
    kept beside it, renamed ``NAME.<its time>.json``, never overwritten; a link is refused."""
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    if path.is_symlink():
        raise SystemExit(f"{path} is a link; refusing to write through it")
    if path.exists():
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(path.stat().st_mtime))
        earlier = RESULTS / f"{name}.{stamp}.json"
        while earlier.exists():
            earlier = earlier.with_name(earlier.stem + "-1.json")
        path.rename(earlier)
        print(f"kept the earlier run as {earlier}")
    write_atomically(path, json.dumps(payload, indent=2))
    print(f"wrote {path}")
    return path


def rss_mb() -> float:
    """The current resident set of this process, MB (Linux /proc; NaN elsewhere)."""
    status = Path("/proc/self/status")
    if status.exists():
        for line in status.read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def pick_device(arg: str) -> torch.device:
    if arg == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(arg)


def runs_benchmark_setup(
    doc: str | None, name: str, batch: int, features: int, default_runs: int = 240, quick_runs: int = 24
) -> tuple[argparse.Namespace, torch.device, int, tuple[torch.Tensor, torch.Tensor]]:
    """Command line (``--device``, ``--runs``, ``--quick``) and random data of the many-runs benchmarks.

    Returns the arguments, the device, the number of runs (``quick_runs`` with ``--quick``) and one
    minibatch ``x [R, batch, features]``, ``y [R, batch]`` per run.
    """
    parser = argparse.ArgumentParser(description=doc)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--runs", type=int, default=default_runs)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    device = pick_device(args.device)
    runs = quick_runs if args.quick else args.runs
    print(f"{name} benchmark on {device}: R = {runs}")
    g = torch.Generator().manual_seed(1)
    x = torch.randn(runs, batch, features, generator=g).to(device)
    y = torch.randn(runs, batch, generator=g).to(device)
    return args, device, runs, (x, y)
