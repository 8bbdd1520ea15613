"""Does a library step's ratio to raw PyTorch depend on what else the process holds?

Run: python benchmarks/process_dependence.py --threads 1 [--quick] [--path svi_joint]

One path of benchmarks/svi_step.py (default ``svi_joint``: plain ``SVI``, ``graph="compile"``,
``JointOptim``) on the UCI net (13-50-1, batch 128) is timed interleaved with the raw step,
in one process, in these states, one after another:

1. ``alone``, twice: only the raw step and the path are alive;
2. ``contenders``: twelve other models and their SVI objects (``CompiledSVI(graph="record")`` and Pyro's
   ``AutoNormal``, UCI nets and 784-256-10 nets, a few steps each) are kept alive beside them;
3. ``gc_frozen``: the same, with every object moved out of the garbage collector's reach
   (``gc.freeze()``);
4. ``gc_off``: the same, with the garbage collector off;
5. ``deleted``: the contenders deleted and collected.

Each state reports the median ratio over the interleaved blocks (process CPU time, so waiting
for a shared core is not counted), the garbage collections during it, and the objects it tracks.
The spread of the two ``alone`` rows is the noise a difference must exceed.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import svi_step as bench
from common import interleaved_times, machine, write

SIZES, BATCH = [13, 50, 1], 128


def make_path(kind: str, x: torch.Tensor, y: torch.Tensor):
    loss = bench.DropoutELBO(**({"graph": bench.MODES[kind]} if kind in bench.MODES else {}))
    svi, _, _ = bench.library(kind, SIZES, False, loss, torch.device("cpu"))
    for _ in range(bench.RECORD_AT + 8):  # past the eager steps and the compile
        svi.step(x, y, num_data=bench.N_DATA)
    return svi


def contenders(x: torch.Tensor, y: torch.Tensor) -> list:
    kept = []
    for i in range(12):
        kind = ("compiled_record", "autonormal")[i % 2]
        wide = i % 3 == 2
        sizes = [784, 256, 10] if wide else SIZES
        loss = bench.Trace_ELBO() if kind == "autonormal" else bench.DropoutELBO()
        svi, model, guide = bench.library(kind, sizes, wide, loss, torch.device("cpu"))
        xs = torch.randn(BATCH, 784) if wide else x
        ys = torch.randint(0, 10, (BATCH,)) if wide else y
        for _ in range(5):
            svi.step(xs, ys, num_data=bench.N_DATA)
        kept.append((svi, model, guide))
    return kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="fewer steps and blocks")
    parser.add_argument("--path", default="svi_joint", choices=sorted(bench.LABELS))
    parser.add_argument("--device", default="cpu", help="cpu only")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    steps, blocks = (20, 3) if args.quick else (200, 9)
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(BATCH, 13, generator=g), torch.randn(BATCH, generator=g)
    raw = bench.RawStep(SIZES, False, 1, None, torch.device("cpu"), {"fused": True})
    collections = [0]

    def count(phase: str, info: dict) -> None:
        collections[0] += phase == "start"

    gc.callbacks.append(count)
    rows: dict[str, dict] = {}
    state: dict = {"svi": make_path(args.path, x, y)}

    def measure(name: str) -> None:
        collections[0] = 0
        svi = state["svi"]
        runners = {"raw": lambda: raw.step(x, y), "path": lambda: svi.step(x, y, num_data=bench.N_DATA)}
        times = interleaved_times(runners, torch.device("cpu"), steps, blocks, time.process_time, 2)
        ratio = statistics.median(times["path"]) / statistics.median(times["raw"])
        rows[name] = {
            "ratio": ratio,
            "raw_ms": 1e3 * statistics.median(times["raw"]),
            "path_ms": 1e3 * statistics.median(times["path"]),
            "collections": collections[0],
            "tracked_objects": len(gc.get_objects()),
        }
        print(
            f"{name:12s} {ratio:5.2f}x raw  ({rows[name]['path_ms']:.3f} / {rows[name]['raw_ms']:.3f} ms), "
            f"{collections[0]} collections, {rows[name]['tracked_objects']} tracked objects",
            flush=True,
        )

    measure("alone")
    measure("alone_again")
    state["kept"] = contenders(x, y)
    state["svi"] = make_path(args.path, x, y)  # library() cleared the param store: set up again
    measure("contenders")
    gc.freeze()
    measure("gc_frozen")
    gc.unfreeze()
    gc.disable()
    measure("gc_off")
    gc.enable()
    del state["kept"]
    gc.collect()
    measure("deleted")
    name = "process_dependence_cpu" + ("_quick" if args.quick else "")
    write(
        name,
        {
            "machine": machine(torch.device("cpu")),
            "date": time.strftime("%Y-%m-%d"),
            "path": args.path,
            "steps": steps,
            "blocks": blocks,
            "rows": rows,
        },
    )


if __name__ == "__main__":
    main()
