"""The cost of K-fold cross-validation (``pyro_dropout.export.kfold``) against one fit.

Run: python benchmarks/kfold_cost.py [--threads 1] [--quick]

Timed in one process, interleaved over blocks, process CPU time, best block; each case is a full
K-fold (K fits and K predictions of ``num_samples`` draws) or one fit and one prediction:

* ``one fit`` (the baseline): ``steps`` full-batch CompiledSVI steps and one ``predict``;
* ``kfold (together)``: the default, the K folds as one ``MLP.with_runs(K)`` with each run's fold
  masked out of its likelihood (``vectorize=True``);
* ``kfold (one by one)``: the K folds fitted one after another (``vectorize=False``).

Two sizes: the docs' toy pair (60 points, 1-20-1, 800 steps, ``DropoutELBO(num_particles=4)``)
and a UCI-sized one (455 rows of 13 features, 13-50-1, 2,000 steps, as Boston's split 0).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import pyro
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import interleaved_best, machine, work_clock, write

from pyro_dropout import CompiledSVI, DropoutELBO, DropoutGuide, predict
from pyro_dropout.export import kfold
from pyro_dropout.nn import MLP

CASES = {  # name: (rows, features, hidden, steps, particles)
    "toy 1-20-1, N = 60": (60, 1, (20,), 800, 4),
    "UCI 13-50-1, N = 455": (455, 13, (50,), 2000, 1),
}


def data(n: int, d: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, d, generator=g)
    return x, torch.sin(x.sum(-1)) + 0.2 * torch.randn(n, generator=g)


def one_fit(make: Any, x: torch.Tensor, y: torch.Tensor, steps: int, particles: int, draws: int) -> None:
    with pyro.get_param_store().scope():
        model = make()
        guide = DropoutGuide(model)
        svi = CompiledSVI(model, guide, pyro.optim.Adam({"lr": 1e-2}), DropoutELBO(num_particles=particles))
        for _ in range(steps):
            svi.step(x, y)
        with torch.no_grad():
            predict(model, guide, x, y, num_samples=draws)


def runners(case: tuple, k: int, draws: int, quick: bool) -> dict[str, Any]:
    n, d, hidden, steps, particles = case
    steps = 20 if quick else steps
    x, y = data(n, d)
    make = lambda: MLP(d, hidden=hidden, tau="learned")  # noqa: E731
    options = dict(k=k, steps=steps, loss=DropoutELBO(num_particles=particles), num_samples=draws)
    return {
        "one fit": lambda: one_fit(make, x, y, steps, particles, draws),
        "kfold (together)": lambda: kfold(make, x, y, vectorize=True, **options),
        "kfold (one by one)": lambda: kfold(make, x, y, vectorize=False, **options),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default="cpu", choices=["cpu"], help="CPU only (the fits are small)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="20 steps, K = 3, one block (a smoke test)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    k, draws, blocks = (3, 50, 1) if args.quick else (10, 500, 3)
    device = torch.device("cpu")
    clock, clock_name = work_clock(device)
    out: dict[str, Any] = {
        "machine": machine(device),
        "clock": clock_name,
        "k": k,
        "draws": draws,
        "cases": {},
    }
    for name, case in CASES.items():
        seconds = interleaved_best(runners(case, k, draws, args.quick), device, 1, blocks, clock)
        base = seconds["one fit"]
        print(f"{name}: K = {k}, {draws} draws, {clock_name}, best of {blocks}")
        for what, s in seconds.items():
            print(f"  {what:20s} {s:8.2f} s  {s / base:6.2f}x one fit")
        out["cases"][name] = {"seconds": seconds, "ratio": {w: s / base for w, s in seconds.items()}}
    write("kfold_cost_cpu" + ("_quick" if args.quick else ""), out)


if __name__ == "__main__":
    main()
