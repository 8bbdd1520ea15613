"""One dropout mask per data point against one per function draw: cost and gradient noise.

Run: python benchmarks/per_example_masks.py [--device auto|cpu|cuda] [--runs 240] [--quick]

Two estimators of the same ELBO (``DropoutELBO(per_example_masks=False|True)``):

* **step time** of R = 240 runs of the UCI net (13-50-1, batch 128) trained together as
  ``MLP(runs=R)`` + ``DropoutGuide`` + ``CompiledSVI``, the two estimators alternating,
  best of 3; a raw PyTorch loop with per-example masks batched over the runs is the
  hardware's reference;
* **gradient noise**: the variance over 400 draws of the gradient of the loss with respect
  to the first layer's variational mean M, at the same parameters, summed over M's entries,
  for a one-run net with p = 0.05 and p = 0.5. The benchmark checks that the two gradient
  means agree (the estimators are unbiased for the same quantity) within 5 standard errors.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import pyro
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import best_time, machine, pick_device, write

from pyro_dropout import DropoutELBO, DropoutGuide
from pyro_dropout.infer import CompiledSVI
from pyro_dropout.nn import MLP

D, H, B, N_TRAIN, LR = 13, 50, 128, 364, 1e-3


def library(runs: int, device: torch.device, per_example: bool) -> CompiledSVI:
    pyro.clear_param_store()
    p = torch.linspace(0.005, 0.1, runs, device=device).reshape(runs, 1)
    tau = torch.linspace(0.1, 0.2, runs, device=device)
    model = MLP(D, hidden=(H,), tau=tau, runs=runs, length_scale=1e-2).to(device)
    guide = DropoutGuide(model, dropout=p)
    return CompiledSVI(model, guide, pyro.optim.Adam({"lr": LR}), DropoutELBO(per_example_masks=per_example))


class RawPerExample:
    """Raw PyTorch dropout training of ``runs`` networks, one mask per example, batched."""

    def __init__(self, runs: int, device: torch.device):
        g = torch.Generator().manual_seed(0)
        self.w1 = ((torch.rand(runs, H, D, generator=g) * 2 - 1) / math.sqrt(D)).to(device).requires_grad_()
        self.b1 = torch.zeros(runs, 1, H, device=device, requires_grad=True)
        self.w2 = ((torch.rand(runs, 1, H, generator=g) * 2 - 1) / math.sqrt(H)).to(device).requires_grad_()
        self.b2 = torch.zeros(runs, 1, 1, device=device, requires_grad=True)
        self.p = torch.full((runs, 1, 1), 0.05, device=device)
        self.opt = torch.optim.Adam([self.w1, self.b1, self.w2, self.b2], lr=LR)
        self.runs, self.device = runs, device

    def step(self, x: torch.Tensor, y: torch.Tensor) -> float:
        keep1 = (torch.rand(self.runs, B, D, device=self.device) > self.p).float() / (1 - self.p)
        keep2 = (torch.rand(self.runs, B, H, device=self.device) > self.p).float() / (1 - self.p)
        h = torch.relu(torch.baddbmm(self.b1, x * keep1, self.w1.transpose(-1, -2)))
        out = torch.baddbmm(self.b2, h * keep2, self.w2.transpose(-1, -2)).squeeze(-1)
        loss = 0.5 * 0.15 * (y - out).pow(2).sum() * (N_TRAIN / B)
        loss = loss + 1e-4 * (self.w1.pow(2).sum() + self.w2.pow(2).sum()) / (2 * 0.95)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        return float(loss.detach())


def gradient_noise(p: float, draws: int, device: torch.device) -> dict[str, float]:
    """Variance of d(loss)/dM (first layer) over ``draws`` for both estimators, same parameters."""
    g = torch.Generator().manual_seed(3)
    x = torch.randn(B, D, generator=g).to(device)
    y = (torch.sin(x[:, :3].sum(-1)) + 0.1 * torch.randn(B, generator=g).to(device)).to(device)
    pyro.clear_param_store()
    pyro.set_rng_seed(0)
    model = MLP(D, hidden=(H,), tau=4.0, length_scale=1e-2).to(device)
    guide = DropoutGuide(model, dropout=p)
    guide(x, y)
    params = dict(guide.named_parameters())
    name = next(n for n in params if n.startswith("locs.hidden.0.weight"))
    loc = params[name]
    out = {}
    means = {}
    for per_example in (False, True):
        loss = DropoutELBO(per_example_masks=per_example)
        grads = []
        for _ in range(draws):
            (grad,) = torch.autograd.grad(
                loss.differentiable_loss(model, guide, x, y, num_data=N_TRAIN), [loc]
            )
            grads.append(grad.flatten())
        stack = torch.stack(grads)
        key = "per_example" if per_example else "per_draw"
        out[f"{key}_gradient_variance"] = float(stack.var(0).sum())
        means[key] = (stack.mean(0), stack.var(0) / draws)
    (m0, v0), (m1, v1) = means["per_draw"], means["per_example"]
    z = (m0 - m1) / (v0 + v1).sqrt().clamp_min(1e-12)
    # 650 entries: the largest |z| of 650 standard normals is about 3.3
    assert float(z.abs().max()) < 5.0, float(z.abs().max())
    out["variance_ratio_per_example_over_per_draw"] = (
        out["per_example_gradient_variance"] / out["per_draw_gradient_variance"]
    )
    out["max_abs_z_of_mean_difference"] = float(z.abs().max())
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--runs", type=int, default=240)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    device = pick_device(args.device)
    runs = 24 if args.quick else args.runs
    steps, draws = (5, 50) if args.quick else (50, 400)
    print(f"per_example_masks benchmark on {device}: R = {runs}")
    g = torch.Generator().manual_seed(1)
    xr, yr = torch.randn(runs, B, D, generator=g).to(device), torch.randn(runs, B, generator=g).to(device)
    svis = {pe: library(runs, device, pe) for pe in (False, True)}
    times: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(3):  # alternate, so that a change in machine load hits both
        for pe, svi in svis.items():
            times[pe].append(
                best_time(
                    lambda svi=svi: [svi.step(xr, yr, num_data=N_TRAIN) for _ in range(steps)], device, 1, 1
                )
                / steps
            )
    raw = RawPerExample(runs, device)
    raw_ms = 1e3 * best_time(lambda: [raw.step(xr, yr) for _ in range(steps)], device, 3, 1) / steps
    per_draw, per_example = 1e3 * min(times[False]), 1e3 * min(times[True])
    row = {
        "runs": runs,
        "batch": B,
        "per_draw_ms_per_step": per_draw,
        "per_example_ms_per_step": per_example,
        "per_example_over_per_draw": per_example / per_draw,
        "raw_per_example_ms_per_step": raw_ms,
        "per_example_over_raw_per_example": per_example / raw_ms,
        "noise": {str(p): gradient_noise(p, draws, device) for p in (0.05, 0.5)},
    }
    print(
        f"  one step of {runs} runs: one mask per draw {per_draw:.1f} ms, one per example "
        f"{per_example:.1f} ms ({row['per_example_over_per_draw']:.2f}x); raw PyTorch per example "
        f"{raw_ms:.1f} ms ({row['per_example_over_raw_per_example']:.2f}x of it)"
    )
    for p, noise in row["noise"].items():
        print(
            f"  p = {p}: gradient variance (first-layer M, {draws} draws) per draw "
            f"{noise['per_draw_gradient_variance']:.3g}, "
            f"per example {noise['per_example_gradient_variance']:.3g} "
            f"({noise['variance_ratio_per_example_over_per_draw']:.3f}x); means agree (max |z| "
            f"{noise['max_abs_z_of_mean_difference']:.1f})"
        )
    write(
        f"per_example_masks_{device.type}" + ("_quick" if args.quick else ""),
        {"machine": machine(device), "row": row},
    )


if __name__ == "__main__":
    main()
