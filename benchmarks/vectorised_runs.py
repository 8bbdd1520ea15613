"""R independent training runs (the UCI protocol's splits x grid) as one vectorised model.

Run: python benchmarks/vectorised_runs.py [--device auto|cpu|cuda] [--runs 240] [--quick]

One SVI step of R = 240 runs of the UCI net (13-50-1, batch 128, each run its own data and
drop probability) trained together as ``MLP(runs=R)`` + ``DropoutGuide`` + ``CompiledSVI``,
against

* the same R runs one after another with this library (``CompiledSVI``, its fastest path),
* R raw PyTorch training loops one after another,
* one raw PyTorch loop batched over the R runs (the hardware's side of the comparison).

Sequential times are measured on a few runs and multiplied by R (every run does the same
work). The benchmark checks its result: with p = 0 the vectorised loss equals the sum of
the separate runs' losses.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pyro
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import best_time, machine, runs_benchmark_setup, write

from pyro_dropout import DropoutELBO, DropoutGuide
from pyro_dropout.infer import CompiledSVI
from pyro_dropout.nn import MLP

D, H, B, N_TRAIN, LR = 13, 50, 128, 364, 1e-3


def vectorised(runs: int, device: torch.device, per_example: bool = False):
    pyro.clear_param_store()
    p = torch.linspace(0.005, 0.1, runs, device=device).reshape(runs, 1)
    tau = torch.linspace(0.1, 0.2, runs, device=device)
    model = MLP(D, hidden=(H,), tau=tau, runs=runs, length_scale=1e-2).to(device)
    guide = DropoutGuide(model, dropout=p)
    return CompiledSVI(model, guide, pyro.optim.Adam({"lr": LR}), DropoutELBO(per_example_masks=per_example))


def single(device: torch.device, p: float = 0.05):
    pyro.clear_param_store()
    model = MLP(D, hidden=(H,), tau=0.15, length_scale=1e-2).to(device)
    guide = DropoutGuide(model, dropout=p)
    return CompiledSVI(model, guide, pyro.optim.Adam({"lr": LR}), DropoutELBO())


class RawRuns:
    """Raw PyTorch dropout training of ``runs`` networks batched in one set of tensors.

    One mask per run and step, shared by the minibatch (as the library's default), or one
    per example (``per_example=True``).
    """

    def __init__(self, runs: int, device: torch.device, per_example: bool = False):
        g = torch.Generator().manual_seed(0)
        self.w1 = ((torch.rand(runs, H, D, generator=g) * 2 - 1) / math.sqrt(D)).to(device).requires_grad_()
        self.b1 = torch.zeros(runs, 1, H, device=device, requires_grad=True)
        self.w2 = ((torch.rand(runs, 1, H, generator=g) * 2 - 1) / math.sqrt(H)).to(device).requires_grad_()
        self.b2 = torch.zeros(runs, 1, 1, device=device, requires_grad=True)
        self.p = torch.full((runs, 1, 1), 0.05, device=device)
        params = [self.w1, self.b1, self.w2, self.b2]
        self.opt = torch.optim.Adam(params, lr=LR, foreach=runs * H * D > 100_000)
        self.runs, self.device = runs, device
        self.rows = B if per_example else 1

    def step(self, x: torch.Tensor, y: torch.Tensor) -> float:
        keep1 = (torch.rand(self.runs, self.rows, D, device=self.device) > self.p).float() / (1 - self.p)
        keep2 = (torch.rand(self.runs, self.rows, H, device=self.device) > self.p).float() / (1 - self.p)
        h = torch.relu(torch.baddbmm(self.b1, x * keep1, self.w1.transpose(-1, -2)))
        out = torch.baddbmm(self.b2, h * keep2, self.w2.transpose(-1, -2)).squeeze(-1)
        fit = 0.5 * 0.15 * (y - out).pow(2).sum() * (N_TRAIN / B)
        kl = 1e-4 * (self.w1.pow(2).sum() + self.w2.pow(2).sum()) / (2 * 0.95)
        loss = fit + kl
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        return float(loss.detach())


def check(device: torch.device) -> float:
    """p = 0: the loss of R runs together is the sum of the R separate losses."""
    runs = 4
    g = torch.Generator().manual_seed(2)
    x, y = torch.randn(runs, B, D, generator=g).to(device), torch.randn(runs, B, generator=g).to(device)
    pyro.clear_param_store()
    tau = torch.tensor([0.1, 0.2, 0.3, 0.4], device=device)
    model = MLP(D, hidden=(H,), tau=tau, runs=runs, length_scale=1e-2).to(device)
    guide = DropoutGuide(model, dropout=0.0)
    together = DropoutELBO().loss(model, guide, x, y, num_data=N_TRAIN)
    medians = guide.median()
    separate = 0.0
    for r in range(runs):
        pyro.clear_param_store()
        m = MLP(D, hidden=(H,), tau=float(tau[r]), length_scale=1e-2).to(device)
        gr = DropoutGuide(m, dropout=0.0)
        gr(x[r], y[r])
        with torch.no_grad():
            for name, param in gr.named_parameters():
                param.copy_(medians[name.removeprefix("locs.").removesuffix("_unconstrained")][r, 0])
        separate += DropoutELBO().loss(m, gr, x[r], y[r], num_data=N_TRAIN)
    error = abs(together - separate) / abs(separate)
    assert error < 1e-5, (together, separate)
    return error


def main() -> None:
    args, device, runs, data = runs_benchmark_setup(__doc__, "vectorised_runs", B, D)
    xr, yr = data
    steps, sample_runs = (5, 2) if args.quick else (50, 4)

    svi = vectorised(runs, device)
    vec = best_time(lambda: [svi.step(xr, yr, num_data=N_TRAIN) for _ in range(steps)], device, 3, 2) / steps
    per_run = []
    for r in range(sample_runs):
        s = single(device)
        per_run.append(
            best_time(
                lambda s=s, r=r: [s.step(xr[r], yr[r], num_data=N_TRAIN) for _ in range(steps)], device, 3, 2
            )
            / steps
        )
    sequential = sum(per_run) / len(per_run) * runs
    raw_one = RawRuns(1, device)
    raw_seq = (
        best_time(lambda: [raw_one.step(xr[:1], yr[:1]) for _ in range(steps)], device, 3, 2) / steps * runs
    )
    raw_all = RawRuns(runs, device)
    raw_vec = best_time(lambda: [raw_all.step(xr, yr) for _ in range(steps)], device, 3, 2) / steps
    row = {
        "runs": runs,
        "batch": B,
        "vectorised_ms_per_step": 1e3 * vec,
        "sequential_library_ms_per_step": 1e3 * sequential,
        "sequential_raw_ms_per_step": 1e3 * raw_seq,
        "vectorised_raw_ms_per_step": 1e3 * raw_vec,
        "speedup_vs_sequential_library": sequential / vec,
        "speedup_vs_sequential_raw": raw_seq / vec,
        "vectorised_vs_vectorised_raw": vec / raw_vec,
        "check_rel_error": check(device),
    }
    print(
        f"  one step of all {runs} runs: vectorised {row['vectorised_ms_per_step']:.1f} ms, "
        f"one after another {row['sequential_library_ms_per_step']:.1f} ms (library) / "
        f"{row['sequential_raw_ms_per_step']:.1f} ms (raw PyTorch), "
        f"raw batched {row['vectorised_raw_ms_per_step']:.1f} ms"
    )
    print(
        f"  speed-up {row['speedup_vs_sequential_library']:.1f}x over sequential library runs, "
        f"{row['speedup_vs_sequential_raw']:.1f}x over sequential raw loops; "
        f"{row['vectorised_vs_vectorised_raw']:.2f}x the batched raw loop"
    )
    write(
        f"vectorised_runs_{device.type}" + ("_quick" if args.quick else ""),
        {"machine": machine(device), "row": row},
    )


if __name__ == "__main__":
    main()
