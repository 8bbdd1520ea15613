"""A regression front door's noise level: never a silent default; given, learned by ``fit`` or
picked on held-out data, and said. Seeds fixed; tolerances stated at each assert."""

import math
import warnings

import pytest
import torch
from torch import nn

from pyro_dropout import MCDropout
from pyro_dropout.front import held_out_tau


@pytest.fixture(scope="module")
def trained():
    """A 1-64-64-1 ReLU net with dropout 0.05, trained on sin(2x) + noise of sd 0.1 (2,000 points:
    1,500 to train, 250 held out, 250 to test)."""
    torch.manual_seed(0)
    x = torch.rand(2000, 1) * 4 - 2
    y = torch.sin(2 * x[:, 0]) + 0.1 * torch.randn(2000)
    net = nn.Sequential(
        nn.Linear(1, 64),
        nn.ReLU(),
        nn.Dropout(0.05),
        nn.Linear(64, 64),
        nn.ReLU(),
        nn.Dropout(0.05),
        nn.Linear(64, 1),
    )
    opt = torch.optim.Adam(net.parameters(), 1e-2)
    for _ in range(1500):
        opt.zero_grad()
        ((net(x[:1500]).squeeze(-1) - y[:1500]) ** 2).mean().backward()
        opt.step()
    return net.eval(), x, y


def test_without_tau_nothing_is_predicted_and_the_ways_to_it_are_named(trained):
    net, x, y = trained
    bnn = MCDropout(net, "regression")
    assert "not known yet" in repr(bnn)
    for call in (lambda: bnn.predict(x[:5]), lambda: bnn.evaluate(x[:5], y[:5])):
        with pytest.raises(ValueError, match=r"noise level is not known.*tau=.*calibrate.*fit"):
            call()
    assert str(MCDropout(net, "regression", tau=4.0).noise) == "tau = 4 (noise sd 0.5), given (tau=)"


def test_calibrate_picks_the_noise_on_held_out_points_and_says_so(trained):
    net, x, y = trained
    torch.manual_seed(1)
    bnn = MCDropout(net, "regression")
    noise = bnn.calibrate(x[1500:1750], y[1500:1750])
    assert "held-out points" in noise.source and "held-out" in repr(bnn)
    assert noise.sd == pytest.approx(0.1, rel=0.2)  # the noise sd, less the draws' own spread
    report = bnn.evaluate(x[1750:], y[1750:])
    total = float((report.aleatoric_variance + report.epistemic_variance).mean().sqrt())
    assert total == pytest.approx(report.rmse, rel=0.2)  # the predictive as wide as its errors


def test_fit_learns_the_noise_with_the_weights_and_says_so(trained):
    net, x, y = trained
    torch.manual_seed(2)
    bnn = MCDropout(net, "regression")
    loader = [(x[i : i + 100], y[i : i + 100]) for i in range(0, 1500, 100)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # settled: no word that it still moves
        bnn.fit(loader, epochs=20, lr=1e-3)
    assert bnn.noise.source.startswith("learned by fit") and bnn.model.tau_param is None
    assert bnn.noise.sd == pytest.approx(0.1, rel=0.2)  # the ELBO's optimum: noise and the draws' spread
    with pytest.warns(UserWarning, match="still moving in the last epoch"):
        MCDropout(net, "regression").fit(loader[:4], epochs=1)  # 4 steps from 1 / var(y): not settled


def test_a_given_tau_is_used_as_given_by_fit():
    net = nn.Sequential(nn.Linear(3, 4), nn.Dropout(0.2), nn.Linear(4, 1))
    bnn = MCDropout(net, "regression", tau=10.0)
    bnn.fit([(torch.randn(8, 3), torch.randn(8))], epochs=2)
    assert bnn.noise.tau == 10.0 and bnn.model.tau == 10.0


def test_held_out_tau_is_the_maximum_of_the_mc_log_likelihood():
    g = torch.Generator().manual_seed(0)
    means, y = torch.randn(7, 40, generator=g), torch.randn(40, generator=g)
    best = held_out_tau(means, y)

    def mean_ll(tau):
        per_draw = 0.5 * math.log(tau / (2 * math.pi)) - 0.5 * tau * (means.double() - y.double()) ** 2
        return float((torch.logsumexp(per_draw, 0) - math.log(7)).mean())

    assert all(mean_ll(best) >= mean_ll(best * f) for f in (0.9, 0.99, 0.999, 1.001, 1.01, 1.1))
    one_draw = held_out_tau(means[:1], y)  # one draw: the Gaussian's own maximum, 1 / mean square
    assert one_draw == pytest.approx(1 / float(((means[0] - y) ** 2).mean()), rel=1e-6)
    with pytest.raises(ValueError, match="predicts every target exactly"):
        held_out_tau(y.expand(3, 40), y)
