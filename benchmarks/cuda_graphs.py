"""One SVI step with and without CUDA graphs, against the raw PyTorch step, in one process.

Run: python benchmarks/cuda_graphs.py [--device auto|cpu|cuda] [--quick]

On a GPU these small networks are bound by kernel launches (docs/performance.md), which a CUDA
graph replays without Python or per-kernel launch cost. For the UCI net (13-50-1, batch 128,
ELBO) and the wide net (784-1024-1024-10, batch 128; ELBO, and BB-α with K = 10), each path is
timed interleaved with the raw step (``benchmarks/svi_step.py``'s ``RawStep``, fused Adam):

* ``raw_graph``: the raw step (forward, backward and a capturable Adam) captured once in a
  ``torch.cuda.CUDAGraph`` and replayed: the fastest a step of this network can be;
* ``compiled_record``: ``CompiledSVI(graph="record")``, the recorded graph not compiled;
* ``compiled``: ``CompiledSVI`` at its default (``graph="compile"``), Inductor's kernels;
* ``compiled_graphs``: the same compiled while Inductor's ``triton.cudagraphs`` is on,
  so the compiled loss and its gradient replay as CUDA graphs (the optimizer's update stays
  outside them). Inductor's counters are stored (``inductor_counters``): a graph Inductor
  declined to capture shows there as a ``cudagraph_skips`` entry. From one seed, six steps with
  and without the graphs must give the same losses (``graphs_check``): a graph that replayed
  stale masks would not.

Ratios are medians over raw's median in the same blocks (``*_vs_raw``). On a CPU only ``raw``
and ``compiled_record`` run (a smoke test); the graph paths need CUDA.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import date
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import interleaved_times, machine, pick_device, write
from svi_step import N_DATA, RawStep, library

from pyro_dropout import BBAlpha, DropoutELBO

CASES = (
    ("uci", [13, 50, 1], False, "elbo"),
    ("wide", [784, 1024, 1024, 10], True, "elbo"),
    ("wide", [784, 1024, 1024, 10], True, "bbalpha"),
)


def graphed(raw: RawStep, x: torch.Tensor, y: torch.Tensor):
    """``raw``'s whole step captured in a CUDA graph; returns a step that replays it."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up on a side stream, as capture requires
        for _ in range(3):
            raw.opt.zero_grad(set_to_none=True)
            raw.loss(x, y).backward()
            raw.opt.step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    raw.opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        loss = raw.loss(x, y)
        loss.backward()
        raw.opt.step()

    def step() -> float:
        graph.replay()
        return float(loss)  # as the eager steps do: the loss read back each step

    return step


def library_step(kind: str, sizes, classes, make_loss, device, x, y, row: dict):
    """A ``CompiledSVI`` path, its first two steps (recording or compiling) timed apart."""
    base = "compiled_record" if kind == "compiled_record" else "compiled"  # the graphs path compiles too
    svi, _, _ = library(base, sizes, classes, make_loss(), device)
    from torch._inductor import config

    start = time.perf_counter()
    with config.patch({"triton.cudagraphs": kind.endswith("graphs")}):
        for _ in range(2):
            svi.step(x, y, num_data=N_DATA)
    row[f"{kind}_first_steps_s"] = time.perf_counter() - start
    return lambda: svi.step(x, y, num_data=N_DATA)


def graphs_train_as_without(sizes, classes, make_loss, device, x, y, steps: int = 6) -> dict:
    """Whether the compiled loss replayed as CUDA graphs draws the masks it draws without them:
    from one seed, ``steps`` steps of each from the same initial network give the same losses
    (the check a default of CUDA graphs would need: a graph replaying stale masks would not)."""
    from torch._inductor import config

    losses = {}
    for graphs in (False, True):
        torch.manual_seed(0)
        svi, _, _ = library("compiled", sizes, classes, make_loss(), device)
        torch.manual_seed(1)
        with config.patch({"triton.cudagraphs": graphs}):
            losses[graphs] = [svi.step(x, y, num_data=N_DATA) for _ in range(steps)]
    worst = max(abs(a - b) / max(abs(a), 1e-12) for a, b in zip(losses[False], losses[True], strict=True))
    distinct = len(set(losses[True])) == steps  # fresh masks each step (and the update) move the loss
    return {"same_losses": worst < 1e-4, "largest_rel_difference": worst, "all_distinct": distinct}


def case(name, sizes, classes, loss_name, device, steps, blocks) -> dict:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(128, sizes[0], generator=g).to(device)
    y = torch.randint(0, sizes[-1], (128,), generator=g) if classes else torch.randn(128, generator=g)
    y = y.to(device)
    k, alpha = (1, None) if loss_name == "elbo" else (10, 0.5)

    def make_loss():
        return DropoutELBO() if alpha is None else BBAlpha(alpha, num_particles=k)

    cuda = device.type == "cuda"
    raw = RawStep(sizes, classes, k, alpha, device, {"fused": True} if cuda else {"foreach": True})
    row: dict = {"case": name, "batch": 128, "loss": loss_name, "particles": k}
    kinds = ["raw_graph", "compiled_record", "compiled", "compiled_graphs"] if cuda else ["compiled_record"]
    for kind in kinds:  # one path per group, each interleaved with raw
        try:
            if kind == "raw_graph":
                adam = {"capturable": True, "foreach": True}
                runner = graphed(RawStep(sizes, classes, k, alpha, device, adam), x, y)
            else:
                runner = library_step(kind, sizes, classes, make_loss, device, x, y, row)
        except Exception as error:  # kept, and the other paths still run
            row[f"{kind}_error"] = f"{type(error).__name__}: {error}"[:500]
            print(f"  {name} {loss_name}: {kind} failed: {row[f'{kind}_error']}")
            continue
        times = interleaved_times(
            {"raw": lambda: raw.step(x, y), kind: runner}, device, steps, blocks, warmup=2
        )
        base = statistics.median(times["raw"])
        row[f"{kind}_ms"] = 1e3 * statistics.median(times[kind])
        row[f"{kind}_vs_raw"] = statistics.median(times[kind]) / base
        row[f"{kind}_vs_raw_min"] = min(times[kind]) / min(times["raw"])
        row["raw_ms"] = min(row.get("raw_ms", float("inf")), 1e3 * base)
        print(
            f"  {name} {loss_name}: {kind:24s} {row[f'{kind}_ms']:7.3f} ms  {row[f'{kind}_vs_raw']:5.2f}x raw"
        )
    if cuda:
        try:
            row["graphs_check"] = graphs_train_as_without(sizes, classes, make_loss, device, x, y)
        except Exception as error:  # kept, as the timings are
            row["graphs_check"] = {"error": f"{type(error).__name__}: {error}"[:500]}
        print(f"  {name} {loss_name}: with and without CUDA graphs from one seed: {row['graphs_check']}")
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    device = pick_device(args.device)
    torch.manual_seed(0)
    steps, blocks = (10, 3) if args.quick else (50, 7)
    print(f"cuda_graphs benchmark on {device} ({blocks} interleaved blocks of {steps} steps)")
    rows = [case(*spec, device, steps, blocks) for spec in CASES]
    from torch._dynamo.utils import counters

    payload = {
        "machine": machine(device),
        "date": date.today().isoformat(),
        "blocks": blocks,
        "steps": steps,
        "rows": rows,
    }
    payload["inductor_counters"] = {k: dict(v) for k, v in counters.items() if k == "inductor"}
    print(f"  Inductor's counters: {payload['inductor_counters']}")
    write(f"cuda_graphs_{device.type}" + ("_quick" if args.quick else ""), payload)


if __name__ == "__main__":
    main()
