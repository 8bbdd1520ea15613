"""The guard a recorded graph reads before every call (``pyro_dropout.guards``): its quick check
(``Guard.now``: the steps of the last reading checked again in C, read in full only where one moved)
against a full reading (``Guard.read``), alone and inside a ``CompiledSVI(graph="record")`` step
against the raw step.

Run: python benchmarks/state_check.py [--threads 1] [--quick]

In one process, interleaved, best block: one check of the UCI net's model, guide and Pyro's param
store (13-50-1) and of a deeper net (13-50-50-50-1) each way, then the UCI net's recorded
``CompiledSVI`` step (batch 32, ``DropoutELBO``) with each, against ``benchmarks/svi_step.py``'s raw
PyTorch step. Checks that both ways give the same fingerprint.
"""

from __future__ import annotations

import argparse
import sys
from datetime import date
from pathlib import Path

import pyro
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import interleaved_best, machine, write
from svi_step import N_DATA, RAW_ADAMS, RawStep, library

from pyro_dropout import DropoutELBO, DropoutGuide
from pyro_dropout.guards import Guard, object_roots
from pyro_dropout.infer.recorded.graph import RECORD_AT
from pyro_dropout.nn import MLP


def check_runners(hidden: tuple[int, ...]) -> dict[str, object]:
    model = MLP(13, 1, hidden=hidden)
    guide = DropoutGuide(model, dropout=0.05)
    guide(torch.randn(4, 13), torch.randn(4))
    guard = Guard(object_roots(model, guide, DropoutELBO()))
    if guard.read()[0] != guard.now():
        raise SystemExit("the quick check and a full reading disagree")
    return {"full reading": lambda: guard.read()[0], "quick check": guard.now}


def step_runners() -> dict[str, object]:
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(32, 13, generator=g), torch.randn(32, generator=g)
    raw = RawStep([13, 50, 1], False, 1, None, torch.device("cpu"), RAW_ADAMS["fused"])
    out: dict[str, object] = {"raw step": lambda: raw.step(x, y)}
    for route in ("full reading", "quick check"):
        svi, _, _ = library("compiled_record", [13, 50, 1], False, DropoutELBO(), torch.device("cpu"))
        for _ in range(RECORD_AT + 1):  # parameters made, the loss recorded
            svi.step(x, y, num_data=N_DATA)
        if route == "full reading":  # every call read in full
            for recorded in svi._graph_loss.recorded.routes.by_key.values():
                guard = recorded.guard
                guard.now = lambda guard=guard: guard.read()[0]
        out[f"CompiledSVI, {route}"] = lambda svi=svi: svi.step(x, y, num_data=N_DATA)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default="cpu", choices=["cpu"], help="CPU only")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="fewer calls and blocks")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    pyro.settings.set(module_local_params=True)  # several guides of one model's names side by side
    device = torch.device("cpu")
    calls, steps, blocks = (200, 20, 2) if args.quick else (5000, 300, 7)
    rows: dict[str, dict[str, float]] = {}
    for name, hidden in (("UCI net 13-50-1", (50,)), ("deeper 13-50-50-50-1", (50, 50, 50))):
        times = interleaved_best(check_runners(hidden), device, calls, blocks, warmup=2)
        rows[f"one check, {name}"] = {k: 1e6 * v for k, v in times.items()}
    times = interleaved_best(step_runners(), device, steps, blocks, warmup=2)
    rows["CompiledSVI step, UCI net, batch 32"] = {k: 1e6 * v for k, v in times.items()}
    raw = times["raw step"]
    for title, row in rows.items():
        print(f"{title} (us, best of {blocks}):")
        for k, us in row.items():
            ratio = f"  {us / (1e6 * raw):.2f}x raw" if "step" in title else ""
            print(f"  {k:32s} {us:9.1f}{ratio}")
    name = "state_check_cpu" + ("_quick" if args.quick else "")
    write(
        name, {"machine": machine(device), "date": date.today().isoformat(), "blocks": blocks, "rows": rows}
    )


if __name__ == "__main__":
    main()
