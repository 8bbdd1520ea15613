"""Where the default plain-SVI step's time goes, against the raw PyTorch step, in one process.

Run: python benchmarks/step_parts.py --threads 1 [--loss elbo|bbalpha] [--batch 32] [--quick] [--profile]

(CPU only: on a GPU the step is bound by kernel launches, see ``benchmarks/cuda_graphs.py``.)

On the UCI net (13-50-1, batch 32 by default), each timed interleaved over ``blocks`` rounds:

* ``raw_step``: the benchmark of record's raw step (``F.dropout`` + ``F.linear``, Adam fused);
* ``raw_loss_grad``: its loss and backward pass only, no optimizer;
* ``trace_loss_grad``: the library's recorded loss (the graph the default records after its first
  steps) and its backward pass, called directly;
* ``svi_step``: ``pyro.infer.SVI.step`` with ``DropoutGuide``, the default loss and
  ``pyro.optim.Adam`` (what the README's quick start runs);
* ``svi_no_optim``: the same step without ``self.optim(params)`` (Pyro's ``SVI.step`` as written,
  the optimizer call left out): the loss under Pyro's parameter capture, ``zero_grads``;
* ``compiled_step``: ``CompiledSVI(graph="record")`` (the same graph, one fused Adam).

``svi_step - svi_no_optim`` is the time of Pyro's per-parameter optimizers inside the step, and
``raw_step - raw_loss_grad`` that of raw's one optimizer. ``--profile`` also prints, for the raw
and the recorded loss-and-backward, the self time per call of their slowest operations
(``torch.profiler``, grouped by input shape). The medians are printed in
microseconds and written to ``benchmarks/results/step_parts_cpu_<loss>_b<batch>.json``
(``step_parts_cpu_quick.json`` with ``--quick``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import pyro
import torch
from pyro import poutine
from pyro.infer.util import torch_item, zero_grads

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import interleaved_times, machine, write
from svi_step import N_DATA, RawStep, library

from pyro_dropout import BBAlpha, DropoutELBO

SIZES = [13, 50, 1]


def _svi_without_optimizer(svi, x, y):
    """``SVI.step`` as Pyro writes it, without the optimizer's call."""

    def step() -> float:
        with poutine.trace(param_only=True) as capture:
            loss = svi.loss_and_grads(svi.model, svi.guide, x, y, num_data=N_DATA)
        params = {site["value"].unconstrained() for site in capture.trace.nodes.values()}
        zero_grads(params)
        return torch_item(loss)

    return step


def _trace_of(svi, x, y):
    """The default loss's recorded graph of this input shape, and its inputs (the parameters, x, y)."""
    objective = svi.loss_and_grads.__self__
    graph_loss = next(iter(objective.graph_losses.values()))
    (route,) = graph_loss.recorded.routes.by_key.values()
    graph = next(iter(route.graphs.values()))[0]  # one state recorded: (graph, what it keeps alive)
    params = [pyro.param(name).unconstrained() for name in graph_loss.names]
    return graph, (*params, x, y), params


def _loss_grad(loss_of, params):
    def run() -> None:
        loss_of().backward()
        for p in params:
            p.grad = None

    return run


def _print_profile(name: str, run, steps: int) -> None:
    """The self CPU time per call of ``run``'s ten slowest operations, by input shape."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for _ in range(steps):
            run()
    events = sorted(prof.key_averages(group_by_input_shape=True), key=lambda e: -e.self_cpu_time_total)
    print(f"  {name}: self time per call of its slowest operations (us)")
    for event in events[:10]:
        print(f"    {event.key:28s} {event.self_cpu_time_total / event.count:7.2f}  {event.input_shapes}")


def measure(loss_name: str, batch: int, steps: int, blocks: int, profile: bool = False) -> dict:
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(batch, SIZES[0], generator=g), torch.randn(batch, generator=g)
    k, alpha = (1, None) if loss_name == "elbo" else (10, 0.5)

    def make_loss():
        return DropoutELBO() if alpha is None else BBAlpha(alpha, num_particles=k)

    raw = RawStep(SIZES, False, k, alpha, torch.device("cpu"), {"fused": True})
    raw_params = raw.opt.param_groups[0]["params"]
    svi, _, _ = library("svi", SIZES, False, make_loss(), torch.device("cpu"))
    for _ in range(300):  # past the default's eager steps and the graph's first, doubling spot
        svi.step(x, y, num_data=N_DATA)  # checks: from here one check every 64 calls
    traced, inputs, params = _trace_of(svi, x, y)
    runners = {
        "raw_step": lambda: raw.step(x, y),
        "raw_loss_grad": _loss_grad(lambda: raw.loss(x, y), raw_params),
        "trace_loss_grad": _loss_grad(lambda: traced(*inputs), params),
        "svi_step": lambda: svi.step(x, y, num_data=N_DATA),
        "svi_no_optim": _svi_without_optimizer(svi, x, y),
    }
    times = interleaved_times(runners, torch.device("cpu"), steps, blocks, warmup=2)
    if profile:
        for key in ("raw_loss_grad", "trace_loss_grad"):
            _print_profile(key, runners[key], steps)
    pyro.clear_param_store()  # CompiledSVI sets up its own guide of the same names
    compiled, _, _ = library("compiled_record", SIZES, False, make_loss(), torch.device("cpu"))
    compiled_times = interleaved_times(
        {"raw_step": lambda: raw.step(x, y), "compiled_step": lambda: compiled.step(x, y, num_data=N_DATA)},
        torch.device("cpu"),
        steps,
        blocks,
        warmup=300,
    )
    row = {key: 1e6 * statistics.median(t) for key, t in times.items()}
    row["compiled_step"] = 1e6 * statistics.median(compiled_times["compiled_step"])
    row["raw_step_with_compiled"] = 1e6 * statistics.median(compiled_times["raw_step"])
    row["pyro_optimizers"] = row["svi_step"] - row["svi_no_optim"]
    row["raw_optimizer"] = row["raw_step"] - row["raw_loss_grad"]
    return {"loss": loss_name, "batch": batch, "particles": k, "us": row}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", choices=["auto", "cpu"], default="cpu", help="the CPU (only)")
    parser.add_argument("--loss", choices=["elbo", "bbalpha"], default="elbo")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--quick", action="store_true", help="fewer steps and blocks (a smoke run)")
    parser.add_argument("--profile", action="store_true", help="also profile the loss-and-backward parts")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    steps, blocks = (20, 2) if args.quick else (500, 7)
    result = measure(args.loss, args.batch, steps, blocks, args.profile)
    row = result["us"]
    print(f"UCI net, batch {args.batch}, {args.loss}, {args.threads} thread(s): medians in microseconds")
    for key, value in row.items():
        print(f"  {key:24s} {value:8.1f}  ({value / row['raw_step']:.2f}x raw step)")
    payload = {"machine": machine(torch.device("cpu")), "threads": args.threads, **result}
    write("step_parts_cpu_quick" if args.quick else f"step_parts_cpu_{args.loss}_b{args.batch}", payload)


if __name__ == "__main__":
    main()
