"""What ``graph="compile"`` costs before its first fast step, and what a new batch size costs.

Run: python benchmarks/compile_cost.py [--quick] [--device cpu|cuda]

``CompiledSVI(...)`` (its default ``graph="compile"``) on the UCI net (13-50-1, batch 128), each measurement
in a fresh process with one thread and Inductor's on-disk cache in a folder of its own
(``TORCHINDUCTOR_CACHE_DIR``, created empty for the run):

* ``cold``: an empty cache. The first two steps (the loss is recorded and compiled there), then
  the first step at a new batch size (37, the short last batch of an epoch: it runs its recorded graph,
  ``COMPILE_AFTER`` calls before it is compiled), and each shape's step after.
* ``warm``: a second process on the same cache: the same first two steps, the kernels read back.
* ``every_shape`` (not with ``--quick``): an empty cache again, with every input shape compiled at
  its first call (``COMPILE_AFTER = 0``, what each new batch size cost before): the second
  shape's first step, which compiles it.

Seconds are wall time; the steady steps are medians of 50.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine, pick_device, write

BATCH, SHORT, STEADY = 128, 37, 50


def child(device: str, compile_after: int | None) -> dict:
    """One process's timings (run with ``--child``)."""
    import pyro
    import torch

    from pyro_dropout import DropoutELBO, DropoutGuide
    from pyro_dropout.infer import CompiledSVI
    from pyro_dropout.infer.recorded import graph
    from pyro_dropout.nn import MLP

    torch.set_num_threads(1)
    if compile_after is not None:
        graph.COMPILE_AFTER = compile_after
    dev = torch.device(device)
    pyro.set_rng_seed(0)
    model = MLP(13, 1, hidden=(50,), tau=1.0).to(dev)
    guide = DropoutGuide(model, dropout=0.05)
    optim = pyro.optim.Adam({"lr": 1e-3})
    svi = CompiledSVI(model, guide, optim, DropoutELBO(), graph="compile")
    data = {b: (torch.randn(b, 13, device=dev), torch.randn(b, device=dev)) for b in (BATCH, SHORT)}

    def seconds(batch: int, steps: int = 1) -> float:
        start = time.perf_counter()
        for _ in range(steps):
            svi.step(*data[batch], num_data=1000)
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        return (time.perf_counter() - start) / steps

    out = {"first_steps_s": seconds(BATCH) + seconds(BATCH)}
    out["new_batch_first_step_s"] = seconds(SHORT)
    out["step_ms"] = 1e3 * statistics.median(seconds(BATCH) for _ in range(STEADY))
    out["new_batch_step_ms"] = 1e3 * statistics.median(seconds(SHORT) for _ in range(STEADY))
    return out


def in_process(cache: Path, device: str, compile_after: int | None = None) -> dict:
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache), "OMP_NUM_THREADS": "1"}
    spec = json.dumps({"device": device, "compile_after": compile_after})
    out = subprocess.run(
        [sys.executable, __file__, "--child", spec], env=env, capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        raise SystemExit(f"the measuring process failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the cold and warm processes only")
    parser.add_argument("--device", default="cpu", help="auto, cpu or cuda")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        spec = json.loads(args.child)
        print(json.dumps(child(spec["device"], spec["compile_after"])))
        return
    device = pick_device(args.device)
    rows: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="inductor-") as folder:
        cache = Path(folder) / "shared"
        rows["cold"] = in_process(cache, str(device))
        rows["warm"] = in_process(cache, str(device))
        if not args.quick:
            rows["every_shape"] = in_process(Path(folder) / "fresh", str(device), compile_after=0)
    for name, row in rows.items():
        print(
            f"{name:12s} first two steps {row['first_steps_s']:5.1f} s, first step at batch {SHORT} "
            f"{row['new_batch_first_step_s']:6.2f} s; steps {row['step_ms']:.2f} ms (batch {BATCH}), "
            f"{row['new_batch_step_ms']:.2f} ms (batch {SHORT})"
        )
    name = f"compile_cost_{device.type}" + ("_quick" if args.quick else "")
    write(name, {"machine": machine(device), "date": time.strftime("%Y-%m-%d"), "rows": rows})


if __name__ == "__main__":
    main()
