"""Many runs in one vectorised model, or in chunks of runs one model after another.

Run: python benchmarks/run_chunks.py [--device auto|cpu|cuda] [--runs 240] [--quick]

The UCI protocol trains a stage's runs (splits x grid points) as ``MLP(runs=R)``. With
BB-alpha's K = 10 particles and one mask per example, a training step of R = 240 runs of
kin8nm's network (8-50-1, batch 128) holds activations of R x K x 128 x 50 floats (61 MB)
and is bound by memory traffic. This benchmark times one training step of all R runs in one
model against the same R runs trained as chunks of C runs (the sum of R / C chunk steps),
for BB-alpha (K = 10) and MC dropout (K = 1), both with one mask per example, and prints
each chunking's time as a ratio to the one model. ``Settings.step_memory_mb`` (the UCI
protocol's chunking rule) is derived from it: a chunk's largest activation
(C x K x batch x width x 4 bytes) kept under about 8 MB.

Times are process CPU time on CPU (a shared machine's other jobs move it less than wall
time), the best of ``repeats`` rounds in which every configuration runs once, in turn. Check:
with p = 0 the loss of runs in one model equals the sum of their chunks' losses.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pyro
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import interleaved_best, machine, runs_benchmark_setup, work_clock, write

from pyro_dropout import BBAlpha, DropoutELBO, DropoutGuide
from pyro_dropout.infer import CompiledSVI
from pyro_dropout.nn import MLP

D, H, B, N_TRAIN, LR = 8, 50, 128, 5898, 1e-3  # kin8nm's grid runs
WARMUP = 4


def model_of(runs: int, particles: int, device: torch.device) -> CompiledSVI:
    """``runs`` runs of the UCI net in one model; BB-alpha (alpha = 0.5) with ``particles`` > 1."""
    p = torch.tensor([0.005, 0.01, 0.05, 0.1], device=device).repeat(runs // 4 + 1)[:runs].reshape(runs, 1)
    tau = torch.linspace(150.0, 250.0, runs, device=device) * 0.07  # kin8nm's grid, standardised
    model = MLP(D, hidden=(H,), tau=tau, runs=runs, length_scale=1e-2).to(device)
    guide = DropoutGuide(model, dropout=p)
    loss = (
        BBAlpha(0.5, num_particles=particles, per_example_masks=True)
        if particles > 1
        else DropoutELBO(per_example_masks=True)
    )
    return CompiledSVI(model, guide, pyro.optim.Adam({"lr": LR}), loss)


def chunked_step(runs: int, chunk: int, particles: int, data: tuple, device: torch.device):
    """One step of ``runs`` runs as chunks of ``chunk`` runs: a function timing all chunks once."""
    x, y = data
    starts = range(0, runs, chunk)
    pieces = [(x[s : s + chunk], y[s : s + chunk]) for s in starts]
    models = []
    for s, (xb, yb) in zip(starts, pieces, strict=True):
        # each model keeps its own parameters (module_local_params, set by main)
        svi = model_of(min(chunk, runs - s), particles, device)
        for _ in range(WARMUP):  # the first steps trace and profile the graph
            svi.step(xb, yb, num_data=N_TRAIN)
        models.append(svi)

    def step() -> None:
        for svi, (xb, yb) in zip(models, pieces, strict=True):
            svi.step(xb, yb, num_data=N_TRAIN)

    return step


def check(device: torch.device) -> float:
    """p = 0: the BB-alpha loss of 4 runs in one model equals the sum over two chunks of 2 runs
    holding the same parameters (the runs share nothing, so chunking changes no number)."""
    runs, half = 4, 2
    g = torch.Generator().manual_seed(2)
    x, y = torch.randn(runs, B, D, generator=g).to(device), torch.randn(runs, B, generator=g).to(device)
    tau = torch.tensor([1.0, 2.0, 3.0, 4.0], device=device)
    loss = BBAlpha(0.5, num_particles=10, per_example_masks=True)

    def built(rows: slice) -> tuple:
        pyro.clear_param_store()
        model = MLP(D, hidden=(H,), tau=tau[rows], runs=len(tau[rows]), length_scale=1e-2).to(device)
        guide = DropoutGuide(model, dropout=0.0)
        guide(x[rows], y[rows], num_data=N_TRAIN)
        return model, guide

    model, guide = built(slice(None))
    whole = loss.loss(model, guide, x, y, num_data=N_TRAIN)
    medians = guide.median()
    chunks = 0.0
    for start in range(0, runs, half):
        rows = slice(start, start + half)
        part_model, part_guide = built(rows)
        with torch.no_grad():
            for name, param in part_guide.named_parameters():
                param.copy_(medians[name.removeprefix("locs.").removesuffix("_unconstrained")][rows])
        chunks += loss.loss(part_model, part_guide, x[rows], y[rows], num_data=N_TRAIN)
    error = abs(whole - chunks) / abs(whole)
    assert error < 1e-5, (whole, chunks)
    return error


def main() -> None:
    # several live models of one set of site names, stepped in turn: each keeps its own parameters
    # (in Pyro's global store they would share them, which the guides refuse)
    pyro.settings.set(module_local_params=True)
    args, device, runs, data = runs_benchmark_setup(__doc__, "run_chunks", B, D)
    clock, clock_name = work_clock(device)
    steps, repeats = (3, 2) if args.quick else (10, 5)
    chunks = [c for c in (12, 24, 36, 60, 120) if c < runs] + [runs]
    rows = []
    for particles in (10, 1):
        steps_of = {c: chunked_step(runs, c, particles, data, device) for c in chunks}
        best = interleaved_best(steps_of, device, steps, blocks=repeats, clock=clock)
        whole = best[runs]
        name = f"BB-alpha K={particles}" if particles > 1 else "MC dropout"
        for c in chunks:
            rows.append(
                {
                    "loss": name,
                    "runs": runs,
                    "chunk": c,
                    "activation_mb_per_chunk": c * particles * B * H * 4 / 2**20,
                    "ms_per_step_all_runs": 1e3 * best[c],
                    "ratio_to_one_model": best[c] / whole,
                }
            )
            print(
                f"  {name}: {runs} runs as chunks of {c:3d} "
                f"({rows[-1]['activation_mb_per_chunk']:5.1f} MB activation a chunk): "
                f"{1e3 * best[c]:7.1f} ms a step of all runs, {best[c] / whole:.2f}x one model"
            )
    error = check(device)
    print(f"  check: p = 0, one model's loss against its chunks' sum, relative error {error:.1e}")
    write(
        f"run_chunks_{device.type}" + ("_quick" if args.quick else ""),
        {"machine": machine(device), "clock": clock_name, "rows": rows, "check_rel_error": error},
    )


if __name__ == "__main__":
    main()
