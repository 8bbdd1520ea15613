"""Bayesian networks written the way their authors' styles write them (Pyro's tutorials, NumPyro's
bnn.py, community examples), with their data: the models of tests/guides/test_pyro_styles.py."""

import pyro
import pyro.distributions as dist
import torch
from pyro.nn import PyroModule, PyroSample
from torch import nn

import pyro_dropout.nn.functional as PF


def split(x, y, n_train):
    return (x[:n_train], y[:n_train]), (x[n_train:], y[n_train:])


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


def regression_data(n=250):
    """Three features, one of them binary, with the tutorial's signal-to-noise (R^2 about 0.5)."""
    g = torch.Generator().manual_seed(0)
    x = torch.cat([torch.rand(n, 1, generator=g) * 4, (torch.rand(n, 1, generator=g) < 0.3).float()], -1)
    x = torch.cat([x, x[:, :1] * x[:, 1:]], -1)
    y = 9.0 - 0.2 * x[:, 0] - 1.9 * x[:, 1] + 0.4 * x[:, 2] + 0.9 * torch.randn(n, generator=g)
    return split(x, y, 170)


def raw_at_model(x, y=None, hidden=5):
    """NumPyro's bnn.py, ported: [in, out] weights used with @, tanh, a Gamma precision. The fix the
    batched-draw error names: matmul (x @ W, plate slot dropped) and dropout_dim=-2 for its inputs."""
    d_x = x.shape[-1]
    at = {"dropout_dim": -2}
    w1 = pyro.sample(
        "w1", dist.Normal(torch.zeros(d_x, hidden), torch.ones(d_x, hidden)).to_event(2), infer=at
    )
    z1 = torch.tanh(PF.matmul(x, w1))
    w2 = pyro.sample(
        "w2", dist.Normal(torch.zeros(hidden, hidden), torch.ones(hidden, hidden)).to_event(2), infer=at
    )
    z2 = torch.tanh(PF.matmul(z1, w2))
    w3 = pyro.sample("w3", dist.Normal(torch.zeros(hidden, 1), torch.ones(hidden, 1)).to_event(2), infer=at)
    z3 = PF.matmul(z2, w3).squeeze(-1)
    prec_obs = pyro.sample("prec_obs", dist.Gamma(3.0, 1.0))
    with pyro.plate("data", x.shape[-2]):
        return pyro.sample("Y", dist.Normal(z3, 1.0 / torch.sqrt(prec_obs)), obs=y)


def raw_at_data(n=140):
    """bnn.py's data: features [1, x, x^2], a cubic with a wiggle, noise sd 0.2 (x standardised)."""
    g = torch.Generator().manual_seed(1)
    s = torch.linspace(-1, 1, n)[torch.randperm(n, generator=g)]
    x = torch.stack([torch.ones(n), s, s**2], -1)
    y = s + 0.2 * s**3 + 0.5 * s**2 * torch.sin(4 * s)
    y = (y - y.mean()) / y.std() + 0.2 * torch.randn(n, generator=g)
    return split(x, y, 100)


class DigitsClassifier(PyroModule):
    """A community BNN classifier: PyroModule[nn.Linear] layers, Categorical(logits=...)."""

    def __init__(self, d_in=2, hidden=32, classes=3):
        super().__init__()
        self.fc1 = PyroModule[nn.Linear](d_in, hidden)
        self.fc1.weight = PyroSample(dist.Normal(0.0, 1.0).expand([hidden, d_in]).to_event(2))
        self.fc1.bias = PyroSample(dist.Normal(0.0, 1.0).expand([hidden]).to_event(1))
        self.out = PyroModule[nn.Linear](hidden, classes)
        self.out.weight = PyroSample(dist.Normal(0.0, 1.0).expand([classes, hidden]).to_event(2))
        self.out.bias = PyroSample(dist.Normal(0.0, 1.0).expand([classes]).to_event(1))

    def forward(self, x, y=None):
        logits = self.out(torch.relu(self.fc1(x)))
        with pyro.plate("data", x.shape[0]):
            return pyro.sample("obs", dist.Categorical(logits=logits), obs=y)


class SequentialClassifier(PyroModule):
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


def blob_data(n=400):
    """Three overlapping classes in the plane (Bayes accuracy about 0.9)."""
    g = torch.Generator().manual_seed(2)
    y = torch.randint(0, 3, (n,), generator=g)
    centres = torch.tensor([[0.0, 1.5], [-1.3, -0.75], [1.3, -0.75]])
    return split(centres[y] + 0.6 * torch.randn(n, 2, generator=g), y, 250)


class ConvNet(PyroModule):
    """A small convnet in Pyro's style, a subsampled data plate; pooling and flattening through
    pyro_dropout.nn.functional (they take the draw dimensions of batched weights)."""

    def __init__(self):
        super().__init__()
        self.conv = PyroModule[nn.Conv2d](1, 6, 3, padding=1)
        self.conv.weight = PyroSample(dist.Normal(0.0, 1.0).expand([6, 1, 3, 3]).to_event(4))
        self.conv.bias = PyroSample(dist.Normal(0.0, 1.0).expand([6]).to_event(1))
        self.fc = PyroModule[nn.Linear](6 * 4 * 4, 2)
        self.fc.weight = PyroSample(dist.Normal(0.0, 1.0).expand([2, 96]).to_event(2))
        self.fc.bias = PyroSample(dist.Normal(0.0, 1.0).expand([2]).to_event(1))

    def forward(self, x, y=None, batch_size=None):
        data = pyro.plate("data", x.shape[0], subsample_size=batch_size)  # draws the minibatch
        h = PF.max_pool2d(torch.relu(self.conv(x[data.indices])), 2)  # weights outside the plate
        logits = self.fc(PF.flatten(h, 3))
        with data:
            return pyro.sample(
                "obs", dist.Categorical(logits=logits), obs=None if y is None else y[data.indices]
            )


def bar_images(n=400):
    """8x8 images of a horizontal (class 0) or vertical (class 1) bar, in noise."""
    g = torch.Generator().manual_seed(3)
    y = torch.randint(0, 2, (n,), generator=g)
    x = 0.8 * torch.randn(n, 1, 8, 8, generator=g)
    rows = torch.randint(1, 7, (n,), generator=g)
    for i in range(n):
        if y[i] == 0:
            x[i, 0, rows[i], 1:7] += 1.5
        else:
            x[i, 0, 1:7, rows[i]] += 1.5
    return split(x, y, 250)


def random_module_model(x, y=None):
    """The pre-PyroModule style: pyro.random_module lifts an nn.Module's parameters to sample sites."""
    net = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 3))
    priors = {
        name: dist.Normal(torch.zeros_like(p), torch.ones_like(p)).to_event(p.dim())
        for name, p in net.named_parameters()
    }
    lifted = pyro.random_module("module", net, priors)()
    with pyro.plate("data", x.shape[-2]):
        return pyro.sample("obs", dist.Categorical(logits=lifted(x)), obs=y)


def numpyro_bnn_model(x, y=None, d_h=5):
    """NumPyro's bnn.py, ported as written: weights stored [in, out] with batch shapes (no
    .to_event), products x @ w, shape asserts, a Gamma precision, targets [N, 1] as one event."""
    n, d_x = x.shape
    w1 = pyro.sample("w1", dist.Normal(torch.zeros(d_x, d_h), torch.ones(d_x, d_h)))
    assert w1.shape == (d_x, d_h)
    z1 = torch.tanh(x @ w1)
    assert z1.shape == (n, d_h)
    w2 = pyro.sample("w2", dist.Normal(torch.zeros(d_h, d_h), torch.ones(d_h, d_h)))
    assert w2.shape == (d_h, d_h)
    z2 = torch.tanh(z1 @ w2)
    w3 = pyro.sample("w3", dist.Normal(torch.zeros(d_h, 1), torch.ones(d_h, 1)))
    assert w3.shape == (d_h, 1)
    precision = pyro.sample("precision", dist.Gamma(3.0, 1.0))
    with pyro.plate("data", n):
        return pyro.sample("Y", dist.Normal(z2 @ w3, 1.0 / precision.sqrt()).to_event(1), obs=y)
