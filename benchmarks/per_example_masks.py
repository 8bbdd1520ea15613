"""One dropout mask per data point against one per function draw: cost and gradient noise.

Run: python benchmarks/per_example_masks.py [--device auto|cpu|cuda] [--runs 240] [--quick]

Two estimators of the same ELBO (``DropoutELBO(per_example_masks=False|True)``):

* **step time** of R = 240 runs of the UCI net (13-50-1, batch 128) trained together as
  ``MLP(runs=R)`` + ``DropoutGuide`` + ``CompiledSVI``, the two estimators alternating,
  best of 3; a raw PyTorch loop with per-example masks batched over the runs is the
  hardware's reference;
* **mask sampler**: the library's Bernoulli sampler (``bernoulli_keep``: two 32-bit draws
  from each random 64-bit word) against ``torch.rand(...) < 1 - p``, in one per-example
  masking of the hidden layer's input ``[R, 128, 50]`` and in the per-example training step,
  alternating, best of 12 each, in process CPU time on CPU (a shared machine's other jobs
  then move it much less than wall time);
* **gradient noise**: the variance over 400 draws of the gradient of the loss with respect
  to the first layer's variational mean M, at the same parameters, summed over M's entries,
  for a one-run net with p = 0.05 and p = 0.5. The benchmark checks that the two gradient
  means agree (the estimators are unbiased for the same quantity) within 5 standard errors.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pyro
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import best_time, machine, runs_benchmark_setup, work_clock, write
from vectorised_runs import N_TRAIN, B, D, H, RawRuns, vectorised

from pyro_dropout import DropoutELBO, DropoutGuide
from pyro_dropout.distributions import BernoulliDropout
from pyro_dropout.nn import MLP


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
    # 650 entries: the largest |z| of 650 standard normals is about 3.3; the entries are
    # skewed, so the mean needs a few hundred draws to be near normal (see main)
    assert float(z.abs().max()) < 5.0, float(z.abs().max())
    out["variance_ratio_per_example_over_per_draw"] = (
        out["per_example_gradient_variance"] / out["per_draw_gradient_variance"]
    )
    out["max_abs_z_of_mean_difference"] = float(z.abs().max())
    return out


def _torch_rand_scaled_keep(
    self: BernoulliDropout, shape: torch.Size, p: torch.Tensor | float
) -> torch.Tensor:
    """The baseline sampler: ``torch.rand(...) < 1 - p``, converted to floats and divided by ``1 - p``."""
    keep_prob = 1.0 - (p.detach() if isinstance(p, torch.Tensor) else p)
    keep = (torch.rand(shape, dtype=self.loc.dtype, device=self.loc.device) < keep_prob).to(self.loc.dtype)
    return keep / (1.0 - p)


def mask_sampler(
    runs: int, device: torch.device, xr: torch.Tensor, yr: torch.Tensor, steps: int, rounds: int
) -> dict[str, float]:
    """The library's Bernoulli sampler against a ``torch.rand`` one: one masking, and a training step.

    The masking is of a ``[runs, B, H]`` input (``x * keep / (1 - p)``, one rate per run). The
    step is the per-example one above, with two ``CompiledSVI`` objects, one traced with each
    sampler. Each pair alternates ``rounds`` times, and the fastest of each counts, in
    :func:`common.work_clock` time.
    """
    clock, _ = work_clock(device)
    x = torch.randn(runs, B, H, device=device)
    p = torch.linspace(0.005, 0.1, runs, device=device).reshape(runs, 1, 1)
    q = BernoulliDropout(torch.zeros(runs, H, D, device=device), p[..., 0, 0])
    library_sampler = BernoulliDropout.scaled_keep_with
    svis = {}
    try:
        for name, sampler in (("library", library_sampler), ("torch_rand", _torch_rand_scaled_keep)):
            BernoulliDropout.scaled_keep_with = sampler  # type: ignore[method-assign]
            svis[name] = vectorised(runs, device, per_example=True)
            svis[name].step(xr, yr, num_data=N_TRAIN)  # traced with this sampler
    finally:
        BernoulliDropout.scaled_keep_with = library_sampler  # type: ignore[method-assign]
    masking = {
        "library": lambda: x * q.scaled_keep_with(x.shape, p),
        "torch_rand": lambda: x * _torch_rand_scaled_keep(q, x.shape, p),
    }
    best = {f"{kind}_{name}": math.inf for kind in ("masking", "step") for name in svis}
    for _ in range(rounds):
        for name in svis:
            best[f"masking_{name}"] = min(
                best[f"masking_{name}"], best_time(masking[name], device, 1, 1, clock)
            )
            step = best_time(
                lambda svi=svis[name]: [svi.step(xr, yr, num_data=N_TRAIN) for _ in range(steps)],
                device,
                1,
                1,
                clock,
            )
            best[f"step_{name}"] = min(best[f"step_{name}"], step / steps)
    out = {f"{key}_ms": 1e3 * value for key, value in best.items()}
    out["masking_library_over_torch_rand"] = best["masking_library"] / best["masking_torch_rand"]
    out["step_library_over_torch_rand"] = best["step_library"] / best["step_torch_rand"]
    return out


def main() -> None:
    # several live models of one set of site names, stepped in turn: each keeps its own parameters
    # (in Pyro's global store they would share them, which the guides refuse)
    pyro.settings.set(module_local_params=True)
    args, device, runs, (xr, yr) = runs_benchmark_setup(__doc__, "per_example_masks", B, D)
    # the noise check always takes 400 draws: with 50, the skewed per-entry gradients (an input
    # dropped for the whole minibatch now and then) put the largest |z| of the mean check above
    # 5 for 1 seed in 3 (12 seeds, p = 0.05); with 400, for none of 40 (largest 4.2)
    steps, draws = (5 if args.quick else 50), 400
    svis = {pe: vectorised(runs, device, pe) for pe in (False, True)}
    times: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(3):  # alternate, so that a change in machine load hits both
        for pe, svi in svis.items():
            times[pe].append(
                best_time(
                    lambda svi=svi: [svi.step(xr, yr, num_data=N_TRAIN) for _ in range(steps)], device, 1, 1
                )
                / steps
            )
    raw = RawRuns(runs, device, per_example=True)
    raw_ms = 1e3 * best_time(lambda: [raw.step(xr, yr) for _ in range(steps)], device, 3, 1) / steps
    per_draw, per_example = 1e3 * min(times[False]), 1e3 * min(times[True])
    sampler = mask_sampler(runs, device, xr, yr, steps=max(steps // 5, 1), rounds=4 if args.quick else 12)
    row = {
        "runs": runs,
        "batch": B,
        "per_draw_ms_per_step": per_draw,
        "per_example_ms_per_step": per_example,
        "per_example_over_per_draw": per_example / per_draw,
        "raw_per_example_ms_per_step": raw_ms,
        "per_example_over_raw_per_example": per_example / raw_ms,
        "mask_sampler": sampler,
        "noise": {str(p): gradient_noise(p, draws, device) for p in (0.05, 0.5)},
    }
    print(
        f"  one step of {runs} runs: one mask per draw {per_draw:.1f} ms, one per example "
        f"{per_example:.1f} ms ({row['per_example_over_per_draw']:.2f}x); raw PyTorch per example "
        f"{raw_ms:.1f} ms ({row['per_example_over_raw_per_example']:.2f}x of it)"
    )
    print(
        f"  Bernoulli sampler against torch.rand ({work_clock(device)[1]}): masking a [{runs}, {B}, {H}] "
        f"input {sampler['masking_library_ms']:.2f} / {sampler['masking_torch_rand_ms']:.2f} ms "
        f"({sampler['masking_library_over_torch_rand']:.2f}x); per-example step "
        f"{sampler['step_library_ms']:.1f} / {sampler['step_torch_rand_ms']:.1f} ms "
        f"({sampler['step_library_over_torch_rand']:.2f}x)"
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
