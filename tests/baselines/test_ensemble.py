"""Deep ensembles as one vectorised model: members differ, train apart, and mix into one predictive."""

import pyro
import pytest
import torch
from pyro.infer import SVI

from pyro_dropout import DropoutELBO
from pyro_dropout.baselines import deep_ensemble, ensemble_predictive
from pyro_dropout.prediction import predict_standard


def _train(model, guide, x, y, steps=300):
    svi = SVI(model, guide, pyro.optim.Adam({"lr": 1e-2}), DropoutELBO())
    members = model.runs
    for _ in range(steps):
        svi.step(x.expand(members, *x.shape), y.expand(members, *y.shape))


def test_regression_mixture_is_the_members_spread_plus_their_noise():
    g = torch.Generator().manual_seed(0)
    x = torch.rand(64, 1, generator=g) * 4 - 2
    y = torch.sin(2 * x[:, 0]) + 0.1 * torch.randn(64, generator=g)
    model, guide = deep_ensemble(1, hidden=(32,), members=4)
    _train(model, guide, x, y)
    x_test = torch.linspace(-6, 6, 50).unsqueeze(-1)
    mean, variance = ensemble_predictive(model, guide, x_test)
    assert mean.shape == variance.shape == (50,) and bool((variance > 0).all())
    # the mixture of the members' Gaussians: its mean and variance by hand, from each member
    members = predict_standard(model, guide, x_test.expand(4, *x_test.shape))
    mu, var = members.means["obs"][0].double(), members.variances["obs"][0].double()  # [M, N]
    assert torch.allclose(mean.double(), mu.mean(0), atol=1e-6)
    by_hand = (var + mu.pow(2)).mean(0) - mu.mean(0).pow(2)  # E[y^2] - E[y]^2 of the mixture
    assert torch.allclose(variance.double(), by_hand, rtol=1e-3, atol=1e-5)
    # the members were initialised apart (not copies of one network): they differ off the data
    assert float(mu.std(0)[x_test[:, 0].abs() > 5].mean()) > 1e-2
    # in the data the mixture's mean fits (noise sd 0.1; tolerance 0.15 RMSE after 300 steps)
    inside = (x.abs() < 1.8)[:, 0]
    fit, _ = ensemble_predictive(model, guide, x[inside])
    assert (fit - y[inside]).pow(2).mean().sqrt() < 0.15


def test_classification_mixture_is_the_mean_of_the_members_probabilities():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(90, 2, generator=g)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 0).long()
    model, guide = deep_ensemble(2, 3, hidden=(16,), members=3, likelihood="categorical")
    _train(model, guide, x, y, steps=200)
    probs = ensemble_predictive(model, guide, x)
    assert probs.shape == (90, 3) and torch.allclose(probs.sum(-1), torch.ones(90), atol=1e-5)
    assert (probs.argmax(-1) == y).double().mean() > 0.8


def test_bad_ensembles_are_refused():
    with pytest.raises(ValueError, match="members must be a whole number >= 1, got 0"):
        deep_ensemble(3, members=0)
    from pyro_dropout.nn import MLP

    single = MLP(3)
    with pytest.raises(ValueError, match="not an ensemble"):
        ensemble_predictive(single, None, torch.zeros(4, 3))
