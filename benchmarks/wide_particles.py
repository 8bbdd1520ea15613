"""Where BB-α with K particles loses time on a wide net: the K masked weight matrices.

Run: python benchmarks/wide_particles.py --threads 1 [--quick]

The wide net of benchmarks/svi_step.py (784-1024-1024-10, batch 128, softmax likelihood), BB-α
with α = 0.5 and K = 10 particles, one step each, interleaved, in process CPU time:

* ``raw``: the hand-written step of svi_step.py: each particle's mask on the layer's inputs,
  shared by the minibatch, and one product with the shared weight (no weight is copied);
* ``library``: ``CompiledSVI`` with ``BBAlpha(0.5, 10)`` at its defaults: one mask per particle,
  shared by the minibatch, on the weight's input units. The guide draws each particle's masked
  weight, so the step writes and reads K copies of every weight matrix;
* ``library_per_example``: the same with ``per_example_masks=True``: the masks drawn for each
  particle and example and applied to the layer's inputs, and the products made with the
  weight's mean (no copy). Another estimator of the same objective, with lower variance;
* ``raw_per_example``: the raw step with one mask per particle and example.

Ratios are against ``raw``'s median in the same blocks.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import svi_step as bench
from common import interleaved_times, machine, write

SIZES, BATCH, K, ALPHA = [784, 1024, 1024, 10], 128, 10, 0.5


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="fewer steps and blocks")
    parser.add_argument("--device", default="cpu", help="cpu only")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    steps, blocks = (2, 2) if args.quick else (10, 7)
    cpu = torch.device("cpu")
    bench.pyro.settings.set(module_local_params=True)  # the two library models side by side
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(BATCH, SIZES[0], generator=g), torch.randint(0, SIZES[-1], (BATCH,), generator=g)
    fused = {"fused": True}
    raw = bench.RawStep(SIZES, True, K, ALPHA, cpu, fused)
    raw_example = bench.RawStep(SIZES, True, K, ALPHA, cpu, fused, per_example=True)
    runners = {"raw": lambda: raw.step(x, y), "raw_per_example": lambda: raw_example.step(x, y)}
    for name, per_example in (("library", False), ("library_per_example", True)):
        loss = bench.BBAlpha(ALPHA, num_particles=K, per_example_masks=per_example)
        svi, _, _ = bench.library("compiled", SIZES, True, loss, cpu)
        runners[name] = lambda svi=svi: svi.step(x, y, num_data=bench.N_DATA)
        for _ in range(3):  # the eager first step, the trace
            runners[name]()
    times = interleaved_times(runners, cpu, steps, blocks, time.process_time, warmup=1)
    base = statistics.median(times["raw"])
    rows = {
        name: {
            "ms": 1e3 * statistics.median(t),
            "min_ms": 1e3 * min(t),
            "vs_raw": statistics.median(t) / base,
        }
        for name, t in times.items()
    }
    for name, row in rows.items():
        print(f"{name:20s} {row['ms']:9.1f} ms  {row['vs_raw']:5.2f}x raw (median of {blocks} blocks)")
    name = "wide_particles_cpu" + ("_quick" if args.quick else "")
    write(name, {"machine": machine(cpu), "date": time.strftime("%Y-%m-%d"), "rows": rows})


if __name__ == "__main__":
    main()
