"""A new batch size at every step: the losses' default (``graph="record"``) against the eager loss.

Run: python benchmarks/new_shapes.py [--threads 1] [--quick]

The UCI net (13-50-1) under plain ``SVI`` and ``DropoutELBO``, each step a batch size not seen
before (16, 17, ..., in a shuffled order, the same for both), so that no call signature reaches
its recording. The default keeps at most 32 routes and records nothing: its time is the eager
loss's plus the signature and route bookkeeping. On 0a1ecd5 the default kept every shape's graph
(79 after 80 steps) and took 33.9 s against 0.7 s eager. Each path runs ``steps`` steps per block,
the blocks interleaved; the ratio is the default's median over eager's.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import date
from pathlib import Path

import pyro
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine, write

from pyro_dropout import DropoutELBO, DropoutGuide
from pyro_dropout.nn import MLP


def fit(graph: str, sizes: list[int]) -> tuple[float, int]:
    """Seconds for one step per size, and the graphs kept after."""
    pyro.clear_param_store()
    pyro.set_rng_seed(0)
    model = MLP(13, 1, hidden=(50,))
    loss = DropoutELBO(graph=graph)
    svi = pyro.infer.SVI(model, DropoutGuide(model, dropout=0.05), pyro.optim.Adam({"lr": 1e-3}), loss)
    g = torch.Generator().manual_seed(1)
    batches = [(torch.randn(n, 13, generator=g), torch.randn(n, generator=g)) for n in sizes]
    svi.step(*batches[0], num_data=10_000)  # the first step finds the parameters
    start = time.perf_counter()
    for x, y in batches[1:]:
        svi.step(x, y, num_data=10_000)
    seconds = time.perf_counter() - start
    kept = sum(
        len(r.graphs)
        for gl in loss.__dict__.get("graph_losses", {}).values()
        for r in gl.recorded.routes.by_key.values()
    )
    return seconds, kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="fewer steps and blocks")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    steps, blocks = (40, 2) if args.quick else (200, 5)
    sizes = list(range(16, 16 + steps + 1))
    order = torch.randperm(len(sizes), generator=torch.Generator().manual_seed(2)).tolist()
    sizes = [sizes[i] for i in order]
    times: dict[str, list[float]] = {"record": [], "eager": []}
    kept = 0
    for _ in range(blocks):
        for graph in times:
            seconds, graphs = fit(graph, sizes)
            times[graph].append(seconds)
            kept = max(kept, graphs) if graph == "record" else kept
    ratio = statistics.median(times["record"]) / statistics.median(times["eager"])
    print(f"a new batch size at each of {steps} steps, UCI net, {blocks} blocks:")
    for graph, row in times.items():
        print(f"  DropoutELBO(graph={graph!r}): {statistics.median(row):.2f} s (median)")
    print(f"  the default against eager: {ratio:.2f}x; graphs kept: {kept}")
    name = "new_shapes_cpu" + ("_quick" if args.quick else "")
    row = {"steps": steps, "blocks": blocks, "seconds": times, "ratio": ratio, "graphs_kept": kept}
    write(name, {"machine": machine(torch.device("cpu")), "date": date.today().isoformat(), **row})


if __name__ == "__main__":
    main()
