"""Bayesian linear regression with dropout: the DropoutELBO optimum is known in closed form."""

import pyro
import pyro.distributions as dist
import pytest
import torch
from pyro.infer import SVI

from pyro_dropout import DropoutELBO, DropoutGuide, QuantisedGaussian
from pyro_dropout.nn.functional import linear

N, D, TAU, P, LENGTH = 60, 3, 4.0, 0.3, 2.0


def _problem():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(N, D, generator=g, dtype=torch.float64)
    y = x @ torch.tensor([1.5, -2.0, 0.5], dtype=torch.float64) + TAU**-0.5 * torch.randn(
        N, generator=g, dtype=torch.float64
    )

    def model(x, y=None):
        prior = QuantisedGaussian(x.new_zeros(()), x.new_tensor(1 / LENGTH))
        w = pyro.sample("w", prior.expand([1, D]).to_event(2))
        with pyro.plate("data", N):
            pyro.sample("obs", dist.Normal(linear(x, w).squeeze(-1), TAU**-0.5), obs=y)

    return x, y, model


def expected_weight(x, y):
    """w* = [tau X'X + tau p/(1-p) diag(|X_j|^2) + l^2/(1-p) I]^-1 tau X'y."""
    a = (
        TAU * x.T @ x
        + TAU * P / (1 - P) * torch.diag((x**2).sum(0))
        + LENGTH**2 / (1 - P) * torch.eye(D, dtype=x.dtype)
    )
    return torch.linalg.solve(a, TAU * x.T @ y)


@pytest.mark.parametrize("per_example_masks", [False, True])
def test_svi_lands_on_the_closed_form_expected_weight(per_example_masks):
    """Both estimators (a mask per draw, a mask per data point) have the same optimum."""
    x, y, model = _problem()
    w_star = expected_weight(x, y)
    # the answer is far from ordinary least squares, so the test tells the two apart
    w_ols = torch.linalg.lstsq(x, y.unsqueeze(-1)).solution.squeeze(-1)
    assert (w_star - w_ols).norm() > 0.3 * w_star.norm()

    steps = 1500
    guide = DropoutGuide(model, dropout=P)
    optim = pyro.optim.ClippedAdam({"lr": 0.05, "lrd": 0.01 ** (1 / steps)})
    svi = SVI(model, guide, optim, DropoutELBO(num_particles=64, per_example_masks=per_example_masks))
    average, count = torch.zeros(D, dtype=torch.float64), 0
    for step in range(steps):
        svi.step(x, y)
        if step >= steps // 2:  # Polyak averaging of the iterates removes the SGD noise
            average += guide.median()["w"][0]
            count += 1
    error = ((average / count - w_star).norm() / w_star.norm()).item()
    # measured 2e-4 (seed 0); 10x margin
    assert error < 2e-3, error
