"""Two known limits of MC dropout, measured: the in-between uncertainty and the non-concentration at
a fixed rate (docs/limits.md).

**In between.** The demo's data (``y = x sin x`` + noise 0.3 on [-4, -1] and [1, 4], 200 points)
fitted by the demo's 1-64-64-1 ReLU network under MC dropout (p = 0.1, ``DropoutELBO``), Concrete
dropout (the rate learned), BB-α (α = 0.5, p = 0.1), HMC (NUTS on the same network, N(0, 1)
weights) and a sparse GP (50 inducing points, RBF kernel); each method's epistemic sd (of the
function, not of the noise) on a grid over [-7, 7], and :func:`pyro_dropout.metrics.in_between`'s
sd in the gap between the two intervals against on them.

**Concentration.** A two-class problem in 2-d (``P(y = 1 | x) = sigmoid(3 x1 - 2 x2)``), N from
100 to 10,000 training points, a 2-64-64-2 network under dropout with a fixed p = 0.1 and with
Concrete dropout; the mean mutual information (BALD) on 2,000 test points of the same
distribution against N. A posterior that concentrates has it fall towards 0 as N grows.

    python examples/limits.py --out docs/results/limits          # the docs' settings (~5 min)
    python examples/limits.py --out /tmp/limits --quick          # a first try (~2 min)

Writes ``limits.json``, ``in_between.png`` and ``concentration.png`` into ``--out``.
"""

from __future__ import annotations

import argparse
import json
import time
from datetime import date
from pathlib import Path
from typing import Any

import pyro
import torch
from pyro.infer import SVI

from pyro_dropout import BBAlpha, DropoutELBO, DropoutGuide
from pyro_dropout.baselines import fit_sparse_gp, run_nuts
from pyro_dropout.export import pyplot
from pyro_dropout.metrics import in_between, mutual_information
from pyro_dropout.nn import MLP
from pyro_dropout.prediction import predict, predict_from_samples
from pyro_dropout_experiments.core import save_figure, write_atomically
from pyro_dropout_experiments.demo.run import make_data

METHODS = ("mc-dropout", "concrete", "bbalpha-0.5", "hmc", "sparse-gp")
TAU = 1 / 0.3**2  # the demo's noise precision, known


def _svi_fit(method: str, x: torch.Tensor, y: torch.Tensor, steps: int) -> tuple[Any, Any]:
    pyro.clear_param_store()
    pyro.set_rng_seed(0)
    model = MLP(1, hidden=(64, 64), tau=TAU)
    guide = DropoutGuide(model, concrete=True) if method == "concrete" else DropoutGuide(model, dropout=0.1)
    loss = BBAlpha(0.5, num_particles=10) if method == "bbalpha-0.5" else DropoutELBO(num_particles=4)
    optim = pyro.optim.ClippedAdam({"lr": 5e-3, "lrd": 0.1 ** (1 / steps)})
    svi = SVI(model, guide, optim, loss)
    for _ in range(steps):
        svi.step(x, y)
    return model, guide


def epistemic_sd(method: str, x: torch.Tensor, y: torch.Tensor, grid: torch.Tensor, a: Any) -> torch.Tensor:
    """``[M]``: the sd of the fitted function at ``grid`` under ``method``'s posterior."""
    if method == "sparse-gp":
        mx, sx, my, sy = x.mean(), x.std(), y.mean(), y.std()
        gp = fit_sparse_gp((x - mx) / sx, (y - my) / sy, num_inducing=50, steps=a.gp_steps)
        with torch.no_grad():
            _, var = gp(((grid - mx) / sx).double(), full_cov=False, noiseless=True)
        return (var.clamp_min(0).sqrt() * sy).float()
    if method == "hmc":
        model = MLP(1, hidden=(64, 64), tau=TAU, prior="normal", length_scale=1.0)
        samples = run_nuts(model, x, y, warmup=a.hmc_draws, samples=a.hmc_draws, max_tree_depth=7)
        means = predict_from_samples(model, samples, grid, return_sites=()).means["obs"]
    else:
        model, guide = _svi_fit(method, x, y, a.steps)
        means = predict(model, guide, grid, num_samples=a.num_samples, return_sites=()).means["obs"]
    return means.std(0)


def _since(start: float) -> float:
    return round(time.perf_counter() - start, 1)


def run_in_between(a: argparse.Namespace) -> dict[str, Any]:
    x, y, _, _ = make_data(seed=0)
    grid = torch.linspace(-7, 7, 400).unsqueeze(-1)
    far = grid.abs().squeeze(-1) > 6
    out: dict[str, Any] = {"grid": grid.squeeze(-1).tolist(), "methods": {}}
    for method in METHODS:
        start = time.perf_counter()
        sd = epistemic_sd(method, x, y, grid, a)
        if not bool((sd > 0).any()):  # e.g. NUTS given too few draws to leave its start
            out["methods"][method] = {"sd": sd.tolist(), "ratio": None, "seconds": _since(start)}
            print(f"{method:>12s}: every draw is the same function (sd 0 everywhere), so no ratio")
            continue
        check = in_between(x, grid, sd)
        out["near"], out["gap"] = check.near, check.gap  # the same for every method: set by x alone
        out["methods"][method] = {
            "sd": sd.tolist(),
            "sd_on_data": check.sd_on_data,
            "sd_in_gap": check.sd_in_gaps,
            "ratio": check.ratio,
            "sd_far": float(sd[far].mean()),
            "seconds": _since(start),
        }
        print(f"{method:>12s}: sd on the data {check.sd_on_data:.3f}, in the gap {check.sd_in_gaps:.3f} "
              f"(ratio {check.ratio:.2f}), beyond |x| > 6 {float(sd[far].mean()):.3f}")  # fmt: skip
    return out


def _classes(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 2, generator=g)
    p = torch.sigmoid(3 * x[:, 0] - 2 * x[:, 1])
    return x, torch.bernoulli(p, generator=g).long()


def mean_mi(n: int, concrete: bool, a: argparse.Namespace) -> dict[str, float]:
    """The mean mutual information on the test points after training on ``n`` points."""
    x, y = _classes(n, seed=n)
    x_test, _ = _classes(2000, seed=1)
    pyro.clear_param_store()
    pyro.set_rng_seed(0)
    model = MLP(2, 2, hidden=(64, 64), likelihood="categorical")
    guide = DropoutGuide(model, concrete=True) if concrete else DropoutGuide(model, dropout=0.1)
    svi = SVI(model, guide, pyro.optim.Adam({"lr": 3e-3}), DropoutELBO())
    g = torch.Generator().manual_seed(0)
    for _ in range(a.steps):
        rows = torch.randint(n, (min(128, n),), generator=g)
        svi.step(x[rows], y[rows], num_data=n)
    probs = predict(model, guide, x_test, num_samples=a.num_samples).probs["obs"]
    record = {"mutual_information": float(mutual_information(probs).mean())}
    if concrete:
        record["rates"] = [float(r) for r in guide.dropout_rates().values()]
    return record


def run_concentration(a: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"sizes": a.sizes, "fixed": [], "concrete": []}
    for n in a.sizes:
        for name, concrete in (("fixed", False), ("concrete", True)):
            out[name].append(mean_mi(n, concrete, a))
        print(f"N = {n:6d}: mean MI, p = 0.1 fixed {out['fixed'][-1]['mutual_information']:.4f}, "
              f"Concrete {out['concrete'][-1]['mutual_information']:.4f}")  # fmt: skip
    return out


def figures(result: dict[str, Any], out: Path) -> None:
    plt = pyplot()
    part = result["in_between"]
    fig, axes = plt.subplots(1, len(part["methods"]), figsize=(13, 2.8), sharey=True)
    for ax, (method, r) in zip(axes, part["methods"].items(), strict=True):
        for lo, hi in ((-4, -1), (1, 4)):
            ax.axvspan(lo, hi, color="0.9", lw=0)
        ax.plot(part["grid"], r["sd"], lw=1.4)
        ratio = "n/a (sd 0)" if r["ratio"] is None else f"{r['ratio']:.2f}"
        ax.set_title(f"{method}: gap/data {ratio}", fontsize=9)
        ax.set_xlabel("x")
    axes[0].set_ylabel("epistemic sd")
    axes[0].set_yscale("log")
    fig.suptitle("epistemic sd; grey: the training intervals", fontsize=9)
    fig.tight_layout()
    save_figure(fig, out / "in_between.png", dpi=110)
    plt.close(fig)
    conc = result["concentration"]
    fig, ax = plt.subplots(figsize=(4.6, 3.2))
    for name, label in (("fixed", "dropout, p = 0.1 fixed"), ("concrete", "Concrete dropout (p learned)")):
        ax.plot(conc["sizes"], [r["mutual_information"] for r in conc[name]], "o-", label=label)
    ax.set(xscale="log", yscale="log", xlabel="training points N", ylabel="mean mutual information")
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, out / "concentration.png", dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for limits.json and the figures")
    parser.add_argument("--quick", action="store_true", help="fewer steps, draws and sizes (~2 min)")
    parser.add_argument("--threads", type=int, default=2, help="PyTorch's threads (default 2)")
    for flag in ("--steps", "--num-samples", "--gp-steps", "--hmc-draws"):
        parser.add_argument(flag, type=int, default=None, help="instead of the setting's (tests)")
    parser.add_argument("--sizes", type=int, nargs="+", default=None, help="the training sizes N")
    a = parser.parse_args(argv)
    chosen = (1000, 200, 500, 100) if a.quick else (3000, 500, 2000, 300)
    for name, value in zip(("steps", "num_samples", "gp_steps", "hmc_draws"), chosen, strict=True):
        setattr(a, name, value if getattr(a, name) is None else getattr(a, name))
    a.sizes = a.sizes or ([100, 1000, 10000] if a.quick else [100, 300, 1000, 3000, 10000])
    torch.set_num_threads(a.threads)
    a.out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    result = {"date": date.today().isoformat(), "quick": a.quick, "in_between": run_in_between(a)}
    result["concentration"] = run_concentration(a)
    result["seconds"] = round(time.perf_counter() - start, 1)
    write_atomically(a.out / "limits.json", json.dumps(result, indent=1))
    figures(result, a.out)
    return result


if __name__ == "__main__":
    main()
