"""One SVI step of the library against a raw PyTorch training step doing the same computation.

Run: python benchmarks/svi_step.py [--device auto|cpu|cuda] [--quick]

Networks: the UCI net (13-50-1, Gaussian likelihood, batch 32 and 128) and a wide net
(784-1024-1024-10, categorical likelihood, batch 128). Losses: DropoutELBO with one
particle, and BBAlpha(0.5) with K = 10 particles. For each, four timings:

* ``svi``: ``pyro.infer.SVI`` with ``DropoutGuide`` and the loss (eager Pyro, the default);
* ``svi_jit``: ``pyro.infer.SVI`` with the loss's traced fast path (``DropoutELBO(jit=True)``,
  ``BBAlpha(..., jit=True)``);
* ``svi_compile``: ``pyro.infer.SVI`` with the loss compiled by ``torch.compile``
  (``jit="compile"``); its first step, which compiles, is timed apart (``compile_s``: with
  Inductor's on-disk cache cold, the first case also pays for starting the compiler);
* ``svi_joint``: the same with ``pyro_dropout.infer.JointOptim(torch.optim.Adam, ...)`` (one
  PyTorch optimizer for all parameters) instead of ``pyro.optim.Adam`` (one per parameter);
* ``compiled``: ``pyro_dropout.infer.CompiledSVI`` (the same model, guide and loss);
* ``raw``: a hand-written PyTorch step with the same network, masks (one per input unit
  and particle, shared by the minibatch, inverted scaling), loss (likelihood scaled by
  N/B plus the KL's weight terms) and optimizer (Adam, foreach), masking the layer inputs,
  the cheapest form of the same computation.

Printed ratios are each against ``raw`` timed in the same interleaved blocks (the variants run
in four groups, each alternating with ``raw``; the printed ``raw`` time is the fastest group's),
so that a slow spell of the machine during one group does not skew its ratio. The benchmark
also checks its result: with the same seed the traced loss (``JitLoss``, which ``CompiledSVI``
and ``jit=True`` share) equals the eager loss.
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
import time
from pathlib import Path

import pyro
import torch
import torch.nn.functional as F
from pyro.infer import SVI

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import interleaved_best, machine, pick_device, write

from pyro_dropout import BBAlpha, DropoutELBO, DropoutGuide
from pyro_dropout.infer import CompiledSVI, JitLoss, JointOptim
from pyro_dropout.nn import MLP

P, TAU, N_DATA, LR = 0.05, 1.0, 10_000, 1e-3


class RawStep:
    """A hand-written dropout training step: masks on layer inputs, Gaussian or softmax loss."""

    def __init__(
        self, sizes: list[int], classes: bool, particles: int, alpha: float | None, device: torch.device
    ):
        g = torch.Generator().manual_seed(0)
        self.weights = [
            (torch.rand(b, a, generator=g) * 2 - 1).div(math.sqrt(a)).to(device).requires_grad_()
            for a, b in itertools.pairwise(sizes)
        ]
        self.biases = [torch.zeros(b, device=device, requires_grad=True) for b in sizes[1:]]
        self.classes, self.k, self.alpha, self.device = classes, particles, alpha, device
        params = [*self.weights, *self.biases]
        # the fastest setting for each size (foreach pays off on large tensors only), as in CompiledSVI
        large = sum(p.numel() for p in params) > 100_000 or device.type == "cuda"
        self.opt = torch.optim.Adam(params, lr=LR, foreach=large)

    def loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        h = x.expand(self.k, *x.shape)
        for i, (w, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            keep = (torch.rand(self.k, 1, w.shape[1], device=self.device) > P).to(x.dtype) / (1 - P)
            h = torch.baddbmm(b, h * keep, w.T.expand(self.k, *w.T.shape))
            if i < len(self.weights) - 1:
                h = torch.relu(h)
        if self.classes:
            log_lik = -F.cross_entropy(h.reshape(-1, h.shape[-1]), y.repeat(self.k), reduction="none").view(
                self.k, -1
            )
        else:
            log_lik = -0.5 * TAU * (y - h.squeeze(-1)).pow(2)
        scale = N_DATA / x.shape[0]
        if self.alpha is None:
            fit = scale * log_lik.sum() / self.k
        else:
            fit = scale * (torch.logsumexp(self.alpha * log_lik, 0) - math.log(self.k)).sum() / self.alpha
        kl = (
            sum(w.pow(2).sum() for w in self.weights) / (2 * (1 - P))
            + sum(b.pow(2).sum() for b in self.biases) / 2
        )
        return kl - fit

    def step(self, x: torch.Tensor, y: torch.Tensor) -> float:
        loss = self.loss(x, y)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        return float(loss.detach())


def library(kind: str, sizes: list[int], classes: bool, loss, device: torch.device, x, y):
    pyro.clear_param_store()
    model = MLP(
        sizes[0],
        sizes[-1],
        hidden=tuple(sizes[1:-1]),
        likelihood="categorical" if classes else "normal",
        tau=TAU,
    ).to(device)
    guide = DropoutGuide(model, dropout=P)
    cls = CompiledSVI if kind == "compiled" else SVI  # svi and svi_jit differ in the loss
    optim = JointOptim(torch.optim.Adam, {"lr": LR}) if kind == "svi_joint" else pyro.optim.Adam({"lr": LR})
    svi = cls(model, guide, optim, loss)
    return svi, model, guide


def check_compiled_matches_eager(sizes, classes, make_loss, device, x, y) -> float:
    """Same seed, same masks: the traced loss equals the eager loss."""
    _, model, guide = library("svi", sizes, classes, make_loss(), device, x, y)
    traced = JitLoss(make_loss(), model, guide)
    traced((x, y), {"num_data": N_DATA})  # eager: creates the parameters, learns their names
    eager_loss = make_loss()
    eager_loss.differentiable_loss(
        model, guide, x, y, num_data=N_DATA
    )  # first call guesses the plate nesting
    pyro.set_rng_seed(123)
    compiled = traced((x, y), {"num_data": N_DATA}).item()
    pyro.set_rng_seed(123)
    eager = eager_loss.differentiable_loss(model, guide, x, y, num_data=N_DATA).item()
    assert math.isclose(compiled, eager, rel_tol=1e-4), (compiled, eager)
    return abs(compiled - eager) / abs(eager)


def case(name, sizes, classes, batch, loss_name, device, steps) -> dict:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(batch, sizes[0], generator=g).to(device)
    y = (
        torch.randint(0, sizes[-1], (batch,), generator=g) if classes else torch.randn(batch, generator=g)
    ).to(device)
    k, alpha = (1, None) if loss_name == "elbo" else (10, 0.5)

    def make_loss(jit: bool | str = False):
        return DropoutELBO(jit=jit) if alpha is None else BBAlpha(alpha, num_particles=k, jit=jit)

    row = {"case": name, "batch": batch, "loss": loss_name, "particles": k}
    raw = RawStep(sizes, classes, k, alpha, device)
    # two groups, each interleaved with raw: eager SVI and jit=True SVI keep their parameters in
    # the global param store under the same names, so they must not be set up side by side
    jits = {"svi_jit": True, "svi_compile": "compile", "svi_joint": "compile"}
    for kinds in (("compiled", "svi"), ("svi_jit",), ("svi_compile",), ("svi_joint",)):
        runners = {"raw": lambda: raw.step(x, y)}
        for kind in kinds:
            svi, _, _ = library(kind, sizes, classes, make_loss(jit=jits.get(kind, False)), device, x, y)
            runners[kind] = lambda svi=svi: svi.step(x, y, num_data=N_DATA)
            if kind == "svi_compile":  # the eager first step, then the step that compiles
                runners[kind]()
                start = time.perf_counter()
                runners[kind]()
                row["compile_s"] = time.perf_counter() - start
        seconds = interleaved_best(runners, device, steps, blocks=5, warmup=2)
        for kind in kinds:  # each against the raw step timed in the same blocks
            row[f"{kind}_ms"] = 1e3 * seconds[kind]
            row[f"{kind}_vs_raw"] = seconds[kind] / seconds["raw"]
        row["raw_ms"] = min(row.get("raw_ms", math.inf), 1e3 * seconds["raw"])
    row["check_rel_error"] = check_compiled_matches_eager(sizes, classes, make_loss, device, x, y)
    print(
        f"  {name:>5s} batch {batch:4d} {loss_name:>7s}: raw {row['raw_ms']:7.3f} ms  compiled "
        f"{row['compiled_ms']:7.3f} ms ({row['compiled_vs_raw']:.2f}x)  SVI {row['svi_ms']:7.3f} ms "
        f"({row['svi_vs_raw']:.2f}x)  SVI jit=True {row['svi_jit_ms']:7.3f} ms "
        f"({row['svi_jit_vs_raw']:.2f}x)  "
        f"SVI jit='compile' {row['svi_compile_ms']:7.3f} ms ({row['svi_compile_vs_raw']:.2f}x, "
        f"compiled in {row['compile_s']:.1f} s)  and with JointOptim {row['svi_joint_ms']:7.3f} ms "
        f"({row['svi_joint_vs_raw']:.2f}x)"
    )
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    device = pick_device(args.device)
    torch.manual_seed(0)
    uci, wide = [13, 50, 1], [784, 1024, 1024, 10]
    steps_small, steps_wide = (20, 3) if args.quick else (500, 20)
    print(f"svi_step benchmark on {device} ({torch.get_num_threads()} threads)")
    rows = []
    for loss_name in ("elbo", "bbalpha"):
        for batch in (32, 128):
            rows.append(case("uci", uci, False, batch, loss_name, device, steps_small))
        rows.append(case("wide", wide, True, 128, loss_name, device, steps_wide))
    write(
        f"svi_step_{device.type}" + ("_quick" if args.quick else ""),
        {"machine": machine(device), "rows": rows},
    )


if __name__ == "__main__":
    main()
