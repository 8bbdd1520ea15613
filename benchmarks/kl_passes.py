"""The dropout KL's weight term in few passes (``pyro_dropout.distributions.squares``) against
the elementwise route it replaces on large sites, and what it does to a wide network's step.

Run: python benchmarks/kl_passes.py [--threads 1] [--quick]

In one process, interleaved, process CPU time, best block:

* the KL of one 1024 x 1024 ``BernoulliDropout`` site against its prior, forward and backward,
  by each route;
* one step of the wide net (784-1024-1024-10, batch 128, ``DropoutELBO``) by plain ``SVI`` and by
  ``CompiledSVI`` (traced), each with the elementwise route (``FEW_PASSES_FROM`` out of reach) and
  with the few-pass one, against the raw PyTorch step of ``benchmarks/svi_step.py``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import pyro
import torch
from torch.distributions import kl_divergence

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import interleaved_best, machine, work_clock, write
from svi_step import N_DATA, RawStep, library

import pyro_dropout.distributions.squares as squares
from pyro_dropout import DropoutELBO
from pyro_dropout.distributions import BernoulliDropout, QuantisedGaussian

OFF = 1 << 62  # a site size no network has: the elementwise route everywhere


def at_cut(cut: int, fn: Any) -> Any:
    """``fn`` run with the few-pass form from ``cut`` weights on (read at every KL)."""

    def run() -> None:
        squares.FEW_PASSES_FROM = cut
        fn()

    return run


def kl_runner(shape: tuple[int, ...]) -> Any:
    loc = torch.randn(*shape, requires_grad=True)
    prior = QuantisedGaussian(torch.tensor(0.0), torch.tensor(1.0)).expand(shape).to_event(len(shape))

    def run() -> None:
        kl_divergence(BernoulliDropout(loc, p=0.05), prior).backward()
        loc.grad = None

    return run


def step_runners(batch: int) -> dict[str, Any]:
    sizes = [784, 1024, 1024, 10]
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(batch, 784, generator=g), torch.randint(0, 10, (batch,), generator=g)
    raw = RawStep(sizes, True, 1, None, torch.device("cpu"), {"foreach": True})
    out: dict[str, Any] = {"raw step": lambda: raw.step(x, y)}
    for kind in ("svi", "compiled"):
        for name, cut in (("elementwise", OFF), ("few passes", squares.FEW_PASSES_FROM)):
            svi, _, _ = library(kind, sizes, True, DropoutELBO(), torch.device("cpu"))
            out[f"{kind}, {name}"] = at_cut(cut, lambda svi=svi: svi.step(x, y, num_data=N_DATA))
            out[f"{kind}, {name}"]()  # the first step: parameters made, the loss traced
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default="cpu", choices=["cpu"], help="CPU only")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="a smaller site and batch, fewer blocks")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    pyro.settings.set(module_local_params=True)  # the four libraries' guides side by side
    device, default_cut = torch.device("cpu"), squares.FEW_PASSES_FROM
    clock, clock_name = work_clock(device)
    shape, batch, blocks, steps = ((256, 256), 16, 2, 2) if args.quick else ((1024, 1024), 128, 7, 5)
    kl = kl_runner(shape)
    kl_times = interleaved_best(
        {"elementwise": at_cut(OFF, kl), "few passes": at_cut(default_cut, kl)}, device, 20, blocks, clock
    )
    step_times = interleaved_best(step_runners(batch), device, steps, blocks, clock)
    squares.FEW_PASSES_FROM = default_cut
    print(f"KL of a {shape[0]} x {shape[1]} site, forward and backward ({clock_name}, best of {blocks}):")
    for name, s in kl_times.items():
        print(f"  {name:12s} {s * 1e3:8.2f} ms  {s / kl_times['few passes']:5.2f}x few passes")
    print(f"wide-net step, batch {batch}:")
    for name, s in step_times.items():
        print(f"  {name:24s} {s * 1e3:8.1f} ms  {s / step_times['raw step']:5.2f}x raw")
    write(
        "kl_passes_cpu" + ("_quick" if args.quick else ""),
        {
            "machine": machine(device),
            "clock": clock_name,
            "site": shape,
            "batch": batch,
            "kl_seconds": kl_times,
            "step_seconds": step_times,
        },
    )


if __name__ == "__main__":
    main()
