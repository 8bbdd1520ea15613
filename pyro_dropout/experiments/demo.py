"""The demo: MC dropout on a built-in 1-d regression problem with a gap in the data."""

from __future__ import annotations

import math
import time
from pathlib import Path

import pyro
import torch
from pyro.infer import SVI, Predictive

from ..guides import DropoutGuide
from ..infer import BBAlpha, DropoutELBO
from ..nn import MLP

__all__ = ["make_data", "run_demo"]


def make_data(n: int = 200, noise: float = 0.3, seed: int = 0) -> tuple[torch.Tensor, ...]:
    """``y = x sin(x) + noise`` observed on [-4, -1] and [1, 4]; test inputs cover [-7, 7]."""
    g = torch.Generator().manual_seed(seed)
    side = torch.randint(0, 2, (n,), generator=g) * 2 - 1
    x = side * (1 + 3 * torch.rand(n, generator=g))
    y = x * torch.sin(x) + noise * torch.randn(n, generator=g)
    x_test = torch.linspace(-7, 7, 400)
    y_test = x_test * torch.sin(x_test) + noise * torch.randn(400, generator=g)
    return x.unsqueeze(-1), y, x_test.unsqueeze(-1), y_test


def run_demo(
    out: Path, steps: int = 3000, num_samples: int = 500, seed: int = 0, loss: str = "elbo"
) -> dict:
    """Train, print figures, and write ``demo.png``; returns the figures."""
    out.mkdir(parents=True, exist_ok=True)
    pyro.set_rng_seed(seed)
    pyro.clear_param_store()
    x, y, x_test, y_test = make_data(seed=seed)
    tau = 1 / 0.3**2
    model = MLP(1, hidden=(64, 64), tau=tau)
    guide = DropoutGuide(model, dropout=0.1)
    objective = DropoutELBO(num_particles=4) if loss == "elbo" else BBAlpha(0.5, num_particles=10)
    svi = SVI(
        model, guide, pyro.optim.ClippedAdam({"lr": 5e-3, "lrd": 0.1 ** (1 / steps)}), objective
    )
    start = time.perf_counter()
    for step in range(steps):
        value = svi.step(x, y)
        if step % max(1, steps // 5) == 0 or step == steps - 1:
            print(f"step {step:5d}  loss {value:10.2f}")
    seconds = time.perf_counter() - start
    with torch.no_grad():
        draws = Predictive(model, guide=guide, num_samples=num_samples, parallel=True)(x_test)[
            "mean"
        ]
    mean, epistemic = draws.mean(0), draws.std(0)
    total_sd = (epistemic.pow(2) + 1 / tau).sqrt()
    log_lik = torch.logsumexp(-0.5 * tau * (y_test - draws) ** 2, 0) - math.log(num_samples)
    log_lik = log_lik - 0.5 * math.log(2 * math.pi) + 0.5 * math.log(tau)
    in_data = (x_test.abs().squeeze(-1) >= 1) & (x_test.abs().squeeze(-1) <= 4)
    figures = {
        "train_seconds": seconds,
        "rmse_in_data": ((mean - y_test)[in_data]).pow(2).mean().sqrt().item(),
        "test_ll_in_data": log_lik[in_data].mean().item(),
        "epistemic_sd_in_data": epistemic[in_data].mean().item(),
        "epistemic_sd_far": epistemic[x_test.abs().squeeze(-1) > 6].mean().item(),
        "coverage_90_in_data": ((y_test - mean).abs() <= 1.645 * total_sd)[in_data]
        .float()
        .mean()
        .item(),
    }
    for key, value in figures.items():
        print(f"{key:>24s}: {value:.3f}")
    _plot(out / "demo.png", x, y, x_test, mean, total_sd, epistemic)
    print(f"wrote {out / 'demo.png'}")
    return figures


def _plot(
    path: Path,
    x: torch.Tensor,
    y: torch.Tensor,
    x_test: torch.Tensor,
    mean: torch.Tensor,
    total_sd: torch.Tensor,
    epistemic: torch.Tensor,
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xt = x_test.squeeze(-1).numpy()
    fig, ax = plt.subplots(figsize=(8, 4))
    for k, alpha in ((2, 0.15), (1, 0.3)):
        ax.fill_between(
            xt,
            (mean - k * total_sd).numpy(),
            (mean + k * total_sd).numpy(),
            color="tab:blue",
            alpha=alpha,
            lw=0,
            label=f"predictive ±{k} sd",
        )
    ax.fill_between(
        xt,
        (mean - 2 * epistemic).numpy(),
        (mean + 2 * epistemic).numpy(),
        color="tab:orange",
        alpha=0.3,
        lw=0,
        label="epistemic ±2 sd",
    )
    ax.plot(xt, mean.numpy(), color="tab:blue", label="MC-dropout mean")
    ax.scatter(x.squeeze(-1).numpy(), y.numpy(), s=6, color="k", label="training data")
    ax.set(xlabel="x", ylabel="y", title="MC dropout: uncertainty grows away from the data")
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
