"""Training steps with glibc's default allocator settings against ``tune_cpu_allocator``.

Run: python benchmarks/allocator.py [--runs 120] [--steps 200] [--blocks 3] [--quick]

The workload is the UCI grid's: R runs of the 13-50-1 UCI network
trained as one vectorised model (``MLP(runs=R)`` + ``DropoutGuide`` + ``CompiledSVI``,
batch 128), and the same step written in raw PyTorch (benchmarks/vectorised_runs.py's
batched loop). Each variant runs in a fresh process, default and tuned alternating, and
the best of ``--blocks`` processes is kept. Printed: milliseconds and minor page faults
per step, and the ratio tuned / default. CPU only: the setting is about host memory.

The benchmark checks its result: the same seed gives the same final loss in both
processes (the allocator changes where memory comes from, not a number computed).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pyro
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine, write
from vectorised_runs import LR, N_TRAIN, B, D, H, RawRuns

from pyro_dropout import DropoutELBO, DropoutGuide
from pyro_dropout.infer import CompiledSVI
from pyro_dropout.nn import MLP
from pyro_dropout.runtime import tune_cpu_allocator


def _library_step(runs: int):
    pyro.clear_param_store()
    p = torch.linspace(0.005, 0.1, runs).reshape(runs, 1)
    model = MLP(D, hidden=(H,), tau=torch.linspace(0.1, 0.2, runs), runs=runs, length_scale=1e-2)
    svi = CompiledSVI(
        model, DropoutGuide(model, dropout=lambda name, site: p), pyro.optim.Adam({"lr": LR}), DropoutELBO()
    )
    return lambda x, y: svi.step(x, y, num_data=N_TRAIN)


def _raw_step(runs: int):
    return RawRuns(runs, torch.device("cpu")).step


def child(variant: str, tuned: bool, runs: int, steps: int) -> dict[str, float]:
    """Time ``steps`` steps in this process; the allocator is tuned first when asked."""
    if tuned and not tune_cpu_allocator():
        raise SystemExit("tune_cpu_allocator did not apply here (not glibc, or MALLOC_* set)")
    torch.set_num_threads(1)
    torch.manual_seed(0)
    pyro.set_rng_seed(0)
    step = _library_step(runs) if variant == "library" else _raw_step(runs)
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(runs, B, D, generator=g), torch.randn(runs, B, generator=g)
    for _ in range(10):
        step(x, y)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    start = time.perf_counter()
    for _ in range(steps):
        loss = step(x, y)
    seconds = time.perf_counter() - start
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
    return {"ms_per_step": 1e3 * seconds / steps, "faults_per_step": faults / steps, "final_loss": loss}


def _spawn(variant: str, tuned: bool, runs: int, steps: int) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    args = [sys.executable, __file__, "--child", variant, "--runs", str(runs), "--steps", str(steps)]
    out = subprocess.run([*args, *(["--tuned"] if tuned else [])], capture_output=True, text=True, env=env)
    if out.returncode:
        raise SystemExit(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=120)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--blocks", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--device", default="cpu", choices=["cpu"])
    parser.add_argument("--child", choices=["library", "raw"])
    parser.add_argument("--tuned", action="store_true")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.tuned, args.runs, args.steps)))
        return
    runs, steps, blocks = (12, 10, 1) if args.quick else (args.runs, args.steps, args.blocks)
    print(f"allocator benchmark on cpu: R = {runs}, {steps} steps, best of {blocks} processes")
    rows = {}
    for variant in ("library", "raw"):
        got: dict[bool, list[dict[str, float]]] = {False: [], True: []}
        for _ in range(blocks):
            for tuned in (False, True):
                got[tuned].append(_spawn(variant, tuned, runs, steps))
        default = min(got[False], key=lambda r: r["ms_per_step"])
        tuned_row = min(got[True], key=lambda r: r["ms_per_step"])
        losses = {r["final_loss"] for r in got[False] + got[True]}
        if len(losses) != 1:
            raise SystemExit(f"{variant}: the final loss differs between processes: {sorted(losses)}")
        rows[variant] = {
            "default": default,
            "tuned": tuned_row,
            "ratio_tuned_over_default": tuned_row["ms_per_step"] / default["ms_per_step"],
        }
        shown = [
            f"{r['ms_per_step']:.2f} ms ({r['faults_per_step']:.0f} faults)" for r in (default, tuned_row)
        ]
        ratio = rows[variant]["ratio_tuned_over_default"]
        print(f"  {variant:7s}: default {shown[0]} / tuned {shown[1]} a step: ratio {ratio:.2f}")
    write(
        "allocator_cpu" + ("_quick" if args.quick else ""),
        {"machine": machine(torch.device("cpu")), "rows": rows},
    )


if __name__ == "__main__":
    main()
