"""Memory kept by ``CompiledSVI`` after it is gone: many models fitted in one process.

Run: python benchmarks/trace_memory.py [--models 15] [--quick]

A process that fits many models (the UCI protocol: 20 splits x a grid of settings) makes one
``CompiledSVI``, and so one trace of the loss, per fit. Each measurement runs in a fresh
process: it fits ``--models`` UCI-sized networks (13-50-1, ``DropoutGuide`` +
``DropoutELBO``, 3 steps each), dropping each ``CompiledSVI`` before the next, and reports
the growth of its resident memory from the first fit to the last, per model. Two routes:

* ``global``: the loss traced with ``torch.jit.trace``, which keeps every traced function
  in TorchScript's global compilation unit for the life of the process;
* ``library``: ``CompiledSVI`` as shipped (a compilation unit of its own per trace).

Printed: MB per model for each, and library / global. The benchmark checks its result: the
library route leaves no function in the global compilation unit.
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine, rss_mb, write


def child(route: str, models: int) -> None:
    """Fit ``models`` networks one after another; print JSON {mb_per_model, global_functions}."""
    import pyro

    import pyro_dropout.infer.compiled_svi as compiled
    from pyro_dropout import DropoutELBO, DropoutGuide
    from pyro_dropout.infer import CompiledSVI
    from pyro_dropout.nn import MLP

    if route == "global":
        compiled._trace = lambda fn, inputs: torch.jit.trace(fn, inputs, check_trace=False)
    torch.set_num_threads(1)
    x, y = torch.randn(128, 13), torch.randn(128)
    rss = []
    for i in range(models):
        pyro.clear_param_store()
        pyro.set_rng_seed(i)
        model = MLP(13, hidden=(50,), tau=4.0)
        svi = CompiledSVI(model, DropoutGuide(model), pyro.optim.Adam({"lr": 1e-3}), DropoutELBO())
        for _ in range(3):
            svi.step(x, y)
        del svi, model
        gc.collect()
        rss.append(rss_mb())
    functions = len(torch.jit._state._python_cu.get_functions())
    print(json.dumps({"mb_per_model": (rss[-1] - rss[0]) / (models - 1), "global_functions": functions}))


def measure(route: str, models: int) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--child", route, "--models", str(models)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=15)
    parser.add_argument("--quick", action="store_true", help="5 models")
    parser.add_argument("--device", default="cpu", help="cpu only (memory of this process)")
    parser.add_argument("--child", choices=["global", "library"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    models = 5 if args.quick else args.models
    if args.child:
        child(args.child, models)
        return
    results = {route: measure(route, models) for route in ("global", "library")}
    for route, r in results.items():
        print(
            f"{route:8s} {r['mb_per_model']:7.2f} MB kept per model, {r['global_functions']} global functions"
        )
    ratio = results["library"]["mb_per_model"] / max(results["global"]["mb_per_model"], 1e-9)
    print(f"library / global: {ratio:.2f}")
    if results["library"]["global_functions"] != 0:
        raise SystemExit("FAIL: the library route left functions in TorchScript's global compilation unit")
    name = f"trace_memory_cpu{'_quick' if args.quick else ''}"
    write(name, {"machine": machine(torch.device("cpu")), "models": models, **results})


if __name__ == "__main__":
    main()
