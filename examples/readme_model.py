"""The README's quick-start model, and the same model written with raw sample sites, fitted as
the README fits them: are their fits and their uncertainty sane?

Prints, for each: the RMSE of the predictive mean against sin(2x) inside the data range [-2, 2];
the ratio of the predictive sd outside the data (2 < |x| <= 4) to the sd inside; and ArviZ's
PSIS-LOO elpd of the model fitted on a 60-point version of the data (a fit with noise sd 0.1
lands near +50; the README model with its only input masked at p = 0.1 gave -418).

    python examples/readme_model.py               # the README's settings (2,000 and 500 steps)
    python examples/readme_model.py --steps 200   # quicker
"""

from __future__ import annotations

import argparse
import json
import warnings
from typing import Any

import pyro
import pyro.distributions as dist
import torch
from pyro.infer import SVI, Predictive

from pyro_dropout import BBAlpha, DropoutELBO, DropoutGuide, QuantisedGaussian, to_arviz
from pyro_dropout.nn import Linear
from pyro_dropout.nn.functional import linear


class Net(pyro.nn.PyroModule):
    """The README's model."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = Linear(1, 50), Linear(50, 1)

    def forward(self, x: torch.Tensor, y: torch.Tensor | None = None) -> torch.Tensor:
        mu = self.fc2(torch.relu(self.fc1(x))).squeeze(-1)
        with pyro.plate("data", x.shape[-2]):
            return pyro.sample("obs", dist.Normal(mu, 0.1), obs=y)


def raw_model(x: torch.Tensor, y: torch.Tensor | None = None) -> torch.Tensor:
    """The README's raw-site model."""
    w1 = pyro.sample("w1", QuantisedGaussian(0.0, 1.0).expand([50, 1]).to_event(2))
    b1 = pyro.sample("b1", QuantisedGaussian(0.0, 1.0).expand([50]).to_event(1))
    w2 = pyro.sample("w2", QuantisedGaussian(0.0, 1.0).expand([1, 50]).to_event(2))
    mu = linear(torch.relu(linear(x, w1, b1)), w2).squeeze(-1)
    with pyro.plate("data", x.shape[-2]):
        return pyro.sample("obs", dist.Normal(mu, 0.1), obs=y)


def data(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(seed)
    x = torch.linspace(-2, 2, n).unsqueeze(-1)
    return x, torch.sin(2 * x).squeeze(-1) + 0.1 * torch.randn(n)


def fit(name: str, x: torch.Tensor, y: torch.Tensor, steps: int) -> tuple[Any, Any]:
    """As the README: the layer model with BB-alpha (10 particles), the raw one with the ELBO (4)."""
    pyro.clear_param_store()
    model = Net() if name == "layers" else raw_model
    guide = DropoutGuide(model)
    loss = BBAlpha(0.5, num_particles=10) if name == "layers" else DropoutELBO(num_particles=4)
    svi = SVI(model, guide, pyro.optim.Adam({"lr": 1e-2}), loss=loss)
    for _ in range(steps):
        svi.step(x, y)
    return model, guide


def figures(name: str, steps: int, seed: int) -> dict[str, float]:
    x, y = data(64, seed)
    model, guide = fit(name, x, y, steps)
    x_test = torch.linspace(-4, 4, 200).unsqueeze(-1)
    draws = Predictive(model, guide=guide, num_samples=500, parallel=True, return_sites=["obs"])(x_test)[
        "obs"
    ]
    inside = x_test.squeeze(-1).abs() <= 2
    mean, sd = draws.mean(0), draws.std(0)
    rmse = (mean[inside] - torch.sin(2 * x_test.squeeze(-1)[inside])).pow(2).mean().sqrt()
    x60, y60 = data(60, seed)
    model, guide = fit(name, x60, y60, steps)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ArviZ's notes on the Pareto k of a few points
        import arviz as az

        elpd = az.loo(to_arviz(model, guide, x60, y60, num_samples=500)).elpd_loo
    return {
        "rates": {k: round(float(v), 4) for k, v in guide.dropout_rates().items()},
        "in_range_rmse": float(rmse),
        "sd_outside_over_inside": float(sd[~inside].mean() / sd[inside].mean()),
        "loo_elpd_60": float(elpd),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=None, help="steps for both (default: the README's)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    out = {}
    for name, readme_steps in (("layers", 2000), ("raw", 500)):
        out[name] = figures(name, args.steps or readme_steps, args.seed)
        print(name, json.dumps(out[name]), flush=True)
    return out


if __name__ == "__main__":
    main()
