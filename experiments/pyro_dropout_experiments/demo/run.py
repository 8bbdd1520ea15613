"""The demo: MC dropout on a built-in 1-d regression problem, observed on two intervals."""

from __future__ import annotations

import time
from pathlib import Path

import pyro
import torch

from pyro_dropout.export import plot_regression
from pyro_dropout.guides import DropoutGuide
from pyro_dropout.infer import BBAlpha, CompiledSVI, DropoutELBO
from pyro_dropout.metrics import regression_report
from pyro_dropout.nn import MLP
from pyro_dropout.prediction import predict, predict_standard

from ..core import save_figure
from .settings import DemoSettings

__all__ = ["DemoSettings", "make_data", "run_demo"]


def make_data(n: int = 200, noise: float = 0.3, seed: int = 0) -> tuple[torch.Tensor, ...]:
    """``y = x sin(x) + noise`` observed on [-4, -1] and [1, 4]; test inputs cover [-7, 7]."""
    g = torch.Generator().manual_seed(seed)
    side = torch.randint(0, 2, (n,), generator=g) * 2 - 1
    x = side * (1 + 3 * torch.rand(n, generator=g))
    y = x * torch.sin(x) + noise * torch.randn(n, generator=g)
    x_test = torch.linspace(-7, 7, 400)
    y_test = x_test * torch.sin(x_test) + noise * torch.randn(400, generator=g)
    return x.unsqueeze(-1), y, x_test.unsqueeze(-1), y_test


def _train(svi: CompiledSVI, x: torch.Tensor, y: torch.Tensor, steps: int) -> float:
    """``steps`` SVI steps, the mean loss printed five times; returns the wall time."""
    start = time.perf_counter()
    window, total = max(1, steps // 5), 0.0
    for step in range(1, steps + 1):
        total += svi.step(x, y)
        if step % window == 0 or step == steps:
            print(f"step {step:5d}  mean loss of the last {window} steps {total / window:10.2f}")
            total = 0.0
    return time.perf_counter() - start


def run_demo(out: Path, s: DemoSettings | None = None) -> dict:
    """Train, print the figures of the predictive, and write ``demo.png``; returns the figures."""
    s = DemoSettings() if s is None else s
    steps, num_samples, seed, loss = s.steps, s.num_samples, s.seed, s.loss
    out.mkdir(parents=True, exist_ok=True)
    pyro.set_rng_seed(seed)
    pyro.clear_param_store()
    x, y, x_test, y_test = (t.to(s.device) for t in make_data(seed=seed))
    model = MLP(1, hidden=(64, 64), tau=1 / 0.3**2).to(s.device)
    guide = DropoutGuide(model, dropout=0.1)
    objective = DropoutELBO(num_particles=4) if loss == "elbo" else BBAlpha(0.5, num_particles=10)
    svi = CompiledSVI(
        model, guide, pyro.optim.ClippedAdam({"lr": 5e-3, "lrd": 0.1 ** (1 / steps)}), objective
    )
    seconds = _train(svi, x, y, steps)

    pred = predict(model, guide, x_test, y_test, num_samples=num_samples)
    report = regression_report(pred, standard=predict_standard(model, guide, x_test, y_test))
    near = ((x_test.abs() >= 1) & (x_test.abs() <= 4)).squeeze(-1)  # inputs like the training data
    in_data = regression_report(pred.points(near))
    figures = {
        "train_seconds": seconds,
        "rmse_near_data": in_data.rmse,
        "test_ll_near_data": in_data.test_ll,
        "coverage_90_near_data": in_data.coverage[0.9],
        "epistemic_sd_near_data": float(report.epistemic_variance[near].mean().sqrt()),
        # the gap between the two intervals: MC dropout's known in-between limit (docs/limits.md)
        "epistemic_sd_in_the_gap": float(
            report.epistemic_variance[x_test.abs().squeeze(-1) < 0.5].mean().sqrt()
        ),
        "epistemic_sd_far_from_data": float(
            report.epistemic_variance[x_test.abs().squeeze(-1) > 6].mean().sqrt()
        ),
        "aleatoric_sd": float(report.aleatoric_variance.mean().sqrt()),
    }
    for key, value in figures.items():
        print(f"{key:>28s}: {value:.3f}")
    fig = plot_regression(
        x_test,
        report.mean,
        report.total_variance.sqrt(),
        x_train=x,
        y_train=y,
        title="MC dropout: wider far from the data, not in the gap between its two intervals",
    )
    save_figure(fig, out / "demo.png", dpi=120)
    return figures
