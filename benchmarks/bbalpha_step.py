"""The BB-alpha training step of the UCI protocol against raw PyTorch BB-alpha, and what it costs
beyond MC dropout's step.

Run: python benchmarks/bbalpha_step.py [--device auto|cpu|cuda] [--runs 48] [--quick]

R runs of the UCI net (13-50-1, batch 128; one split's grid of drop rates and precisions, the
protocol's unit of work) trained together, K = 10 particles, as the protocol trains them:

* ``library``: ``MLP(runs=R)`` + ``DropoutGuide`` + ``CompiledSVI`` + ``BBAlpha(0.5, K)``, one mask
  per example and particle (the protocol's default);
* ``library_per_draw``: the same with one mask per particle shared by the minibatch
  (``per_example_masks=False``; ``pyro-dropout uci --masks draw``): an unbiased estimate of the
  same energy (each point's term sees K independent draws either way), with fewer random numbers;
* ``raw`` and ``raw_per_draw``: hand-written PyTorch BB-alpha with the same network, masks, loss
  and Adam, laid out [R, K·B, ·] so that each layer is one batched product per run;
* ``mc_dropout``: the library's MC dropout step (``DropoutELBO``, one particle, masks per example),
  what the BB-alpha/MC-dropout wall-time ratio of the UCI protocol divides by.

Times are the best of interleaved blocks, in process CPU time on a CPU (a shared machine's other
jobs then move them less than wall time). The benchmark checks its result: with p = 0 every
particle is the same network, so the BB-alpha energy equals the ELBO's loss.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pyro
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import interleaved_best, machine, runs_benchmark_setup, work_clock, write

from pyro_dropout import BBAlpha, DropoutELBO, DropoutGuide
from pyro_dropout.infer import CompiledSVI
from pyro_dropout.nn import MLP

D, H, B, K, ALPHA, N_TRAIN, LR, LENGTH = 13, 50, 128, 10, 0.5, 7373, 1e-3, 1e-2


def grid(runs: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Drop rates and precisions spread over the protocol's grid, one per run."""
    p = torch.linspace(0.005, 0.1, runs, device=device).reshape(runs, 1)
    tau = torch.linspace(0.1, 0.2, runs, device=device)
    return p, tau


def library(runs: int, device: torch.device, loss) -> CompiledSVI:
    pyro.clear_param_store()
    p, tau = grid(runs, device)
    model = MLP(D, hidden=(H,), tau=tau, runs=runs, length_scale=LENGTH).to(device)
    guide = DropoutGuide(model, dropout=p)
    return CompiledSVI(model, guide, pyro.optim.Adam({"lr": LR}), loss)


class RawBBAlpha:
    """Hand-written BB-alpha dropout training of R runs at once, laid out [R, K, B, units]."""

    def __init__(self, runs: int, device: torch.device, per_example: bool):
        g = torch.Generator().manual_seed(0)
        self.w1 = ((torch.rand(runs, D, H, generator=g) * 2 - 1) / math.sqrt(D)).to(device).requires_grad_()
        self.b1 = torch.zeros(runs, 1, H, device=device, requires_grad=True)
        self.w2 = ((torch.rand(runs, H, 1, generator=g) * 2 - 1) / math.sqrt(H)).to(device).requires_grad_()
        self.b2 = torch.zeros(runs, 1, 1, device=device, requires_grad=True)
        p, tau = grid(runs, device)
        self.p, self.tau = p.reshape(runs, 1, 1, 1), tau.reshape(runs, 1, 1)
        self.opt = torch.optim.Adam([self.w1, self.b1, self.w2, self.b2], lr=LR)
        self.runs, self.rows, self.device = runs, B if per_example else 1, device

    def keep(self, units: int) -> torch.Tensor:
        shape = (self.runs, K, self.rows, units)
        return (torch.rand(shape, device=self.device) > self.p) / (1 - self.p)

    def step(self, x: torch.Tensor, y: torch.Tensor) -> float:
        r = self.runs
        xm = (x.unsqueeze(1) * self.keep(D)).reshape(r, K * B, D)  # x: [R, B, D]
        h = torch.relu(torch.baddbmm(self.b1, xm, self.w1)).view(r, K, B, H)
        out = torch.baddbmm(self.b2, (h * self.keep(H)).view(r, K * B, H), self.w2).view(r, K, B)
        log_lik = -0.5 * self.tau.unsqueeze(1) * (y.unsqueeze(1) - out).pow(2)  # [R, K, B]
        energy = (torch.logsumexp(ALPHA * log_lik, 1) - math.log(K)).sum() / ALPHA * (N_TRAIN / B)
        kl = (
            LENGTH**2
            * ((1 - self.p.view(r)) * (self.w1.pow(2).sum((1, 2)) + self.w2.pow(2).sum((1, 2)))).sum()
            / 2
        )
        loss = kl - energy
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        return float(loss.detach())


def check(runs: int, device: torch.device, x: torch.Tensor, y: torch.Tensor) -> float:
    """p = 0: the BB-alpha loss of K identical particles is the ELBO's loss."""
    losses = []
    for loss in (
        BBAlpha(ALPHA, num_particles=K, per_example_masks=True),
        DropoutELBO(per_example_masks=True),
    ):
        pyro.clear_param_store()
        model = MLP(D, hidden=(H,), tau=grid(runs, device)[1], runs=runs, length_scale=LENGTH).to(device)
        guide = DropoutGuide(model, dropout=0.0)
        torch.manual_seed(0)
        guide(x, y)
        losses.append(loss.loss(model, guide, x, y, num_data=N_TRAIN))
    error = abs(losses[0] - losses[1]) / abs(losses[1])
    assert error < 1e-5, losses
    return error


def main() -> None:
    # several live models of one set of site names, stepped in turn: each keeps its own parameters
    # (in Pyro's global store they would share them, which the guides refuse)
    pyro.settings.set(module_local_params=True)
    args, device, runs, (x, y) = runs_benchmark_setup(
        __doc__, "bbalpha_step", B, D, default_runs=48, quick_runs=8
    )
    clock, clock_name = work_clock(device)
    print(f"  K = {K}, batch {B}, {clock_name}")
    svis = {
        "library": library(runs, device, BBAlpha(ALPHA, num_particles=K, per_example_masks=True)),
        "library_per_draw": library(runs, device, BBAlpha(ALPHA, num_particles=K, per_example_masks=False)),
        "mc_dropout": library(runs, device, DropoutELBO(per_example_masks=True)),
    }
    raws = {"raw": RawBBAlpha(runs, device, True), "raw_per_draw": RawBBAlpha(runs, device, False)}
    runners = {name: (lambda s=s: s.step(x, y, num_data=N_TRAIN)) for name, s in svis.items()}
    runners.update({name: (lambda r=r: r.step(x, y)) for name, r in raws.items()})
    steps, blocks = (3, 2) if args.quick else (10, 5)
    ms = {k: 1e3 * v for k, v in interleaved_best(runners, device, steps, blocks, clock, warmup=2).items()}
    ratios = {
        "library_vs_raw": ms["library"] / ms["raw"],
        "library_per_draw_vs_raw_per_draw": ms["library_per_draw"] / ms["raw_per_draw"],
        "per_draw_vs_per_example": ms["library_per_draw"] / ms["library"],
        "bbalpha_vs_mc_dropout": ms["library"] / ms["mc_dropout"],
        "bbalpha_per_draw_vs_mc_dropout": ms["library_per_draw"] / ms["mc_dropout"],
    }
    for name, value in ms.items():
        print(f"  {name:18s} {value:8.2f} ms a step")
    for name, value in ratios.items():
        print(f"  {name:34s} {value:.2f}")
    write(
        f"bbalpha_step_{device.type}" + ("_quick" if args.quick else ""),
        {
            "machine": machine(device),
            "runs": runs,
            "particles": K,
            "clock": clock_name,
            "ms": ms,
            "ratios": ratios,
        },
    )


if __name__ == "__main__":
    main()
