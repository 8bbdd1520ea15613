"""Models written as Pyro's tutorials write them run with DropoutGuide under batched draws:
vectorised particles (BBAlpha at its defaults), Predictive(parallel=True), predict, evaluate,
to_arviz. Before, every batched path failed with "t() expects a tensor with <= 2 dimensions"."""

import pyro
import pyro.distributions as dist
import pytest
import torch
from pyro.infer import SVI, Predictive
from pyro.nn import PyroModule, PyroSample
from torch import nn

from pyro_dropout import BBAlpha, DropoutELBO, DropoutGuide, evaluate, predict, to_arviz


class BayesianRegression(PyroModule):
    """Pyro's Bayesian-regression tutorial, as written there."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = PyroModule[nn.Linear](in_features, out_features)
        self.linear.weight = PyroSample(dist.Normal(0.0, 1.0).expand([out_features, in_features]).to_event(2))
        self.linear.bias = PyroSample(dist.Normal(0.0, 10.0).expand([out_features]).to_event(1))

    def forward(self, x, y=None):
        sigma = pyro.sample("sigma", dist.Uniform(0.0, 10.0))
        mean = self.linear(x).squeeze(-1)
        with pyro.plate("data", x.shape[0]):
            pyro.sample("obs", dist.Normal(mean, sigma), obs=y)
        return mean


class Classifier(PyroModule):
    """A nested PyroModule[nn.Sequential] with a Categorical(logits=...) likelihood."""

    def __init__(self):
        super().__init__()
        self.net = PyroModule[nn.Sequential](
            PyroModule[nn.Linear](2, 16), nn.ReLU(), PyroModule[nn.Linear](16, 3)
        )
        for layer, (out, inp) in ((self.net[0], (16, 2)), (self.net[2], (3, 16))):
            layer.weight = PyroSample(dist.Normal(0.0, 1.0).expand([out, inp]).to_event(2))
            layer.bias = PyroSample(dist.Normal(0.0, 1.0).expand([out]).to_event(1))

    def forward(self, x, y=None):
        logits = self.net(x)
        with pyro.plate("data", x.shape[0]):
            return pyro.sample("obs", dist.Categorical(logits=logits), obs=y)


def _regression_data(n=80):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 3, generator=g)
    return x, x @ torch.tensor([1.0, -2.0, 0.5]) + 1.0 + 0.3 * torch.randn(n, generator=g)


def _fit(model, guide, loss, x, y, steps):
    svi = SVI(model, guide, pyro.optim.Adam({"lr": 0.05}), loss)
    for _ in range(steps):
        svi.step(x, y)


@pytest.mark.parametrize("loss", [DropoutELBO(), BBAlpha(0.5)], ids=["elbo", "bbalpha-defaults"])
def test_the_regression_tutorial_runs_on_every_batched_path(loss):
    x, y = _regression_data()
    model = BayesianRegression(3, 1)
    guide = DropoutGuide(model)
    _fit(model, guide, loss, x, y, 400)
    draws = Predictive(model, guide=guide, num_samples=20, parallel=True)(x)
    assert draws["obs"].shape == (20, 80)
    assert predict(model, guide, x, num_samples=20)["obs"].shape == (20, 80)
    idata = to_arviz(model, guide, x, y, num_samples=20)
    assert idata.log_likelihood["obs"].shape == (1, 20, 80)
    report = evaluate(model, guide, x, y, num_samples=200)
    # a sane fit (noise sd 0.3; tolerance 1.5x it): dropout on a linear model's inputs acts as a
    # ridge penalty that grows with N, so it does not match AutoNormal's 0.28 here (issue 42)
    assert report.rmse < 0.45 and -1.0 < report.test_ll < 0.5


def test_a_nested_sequential_classifier_runs_on_every_batched_path():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(120, 2, generator=g)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 0.5).long()
    model = Classifier()
    guide = DropoutGuide(model)
    assert set(guide.broadcast_layers) == {"net.0", "net.2"}
    _fit(model, guide, BBAlpha(0.5), x, y, 300)
    assert Predictive(model, guide=guide, num_samples=10, parallel=True)(x)["obs"].shape == (10, 120)
    report = evaluate(model, guide, x, y, num_samples=100)
    assert report.accuracy > 0.85
