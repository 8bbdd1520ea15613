"""Small models shared by the inference tests."""

import pyro
import pyro.distributions as dist
import torch

from pyro_dropout import DropoutGuide, QuantisedGaussian
from pyro_dropout.nn import MLP
from pyro_dropout.nn.functional import linear


def raw_regression(x, y=None, hidden=6, tau=4.0, scale=1.0):
    """A one-hidden-layer network written with raw sample sites."""
    d = x.shape[-1]
    zero, one = x.new_zeros(()), x.new_ones(())
    w1 = pyro.sample("w1", QuantisedGaussian(zero, one).expand([hidden, d]).to_event(2))
    b1 = pyro.sample("b1", QuantisedGaussian(zero, one).expand([hidden]).to_event(1))
    w2 = pyro.sample("w2", QuantisedGaussian(zero, one).expand([1, hidden]).to_event(2))
    mu = linear(torch.relu(linear(x, w1, b1)), w2).squeeze(-1)
    with pyro.plate("data", x.shape[-2]), pyro.poutine.scale(scale=scale):
        return pyro.sample("obs", dist.Normal(mu, tau**-0.5), obs=y)


def data(n=12, d=2, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g, dtype=dtype)
    y = torch.sin(x.sum(-1)) + 0.1 * torch.randn(n, generator=g, dtype=dtype)
    return x, y


def small_mlp_svi(objective):
    """``(svi, model, guide)``: a fresh 3-8-1 ``MLP`` under ``DropoutGuide(dropout=0.2)`` and plain
    ``SVI`` with Adam, from an empty param store and seed 0."""
    pyro.clear_param_store()
    pyro.set_rng_seed(0)
    model = MLP(3, 1, hidden=(8,))
    guide = DropoutGuide(model, dropout=0.2)
    return pyro.infer.SVI(model, guide, pyro.optim.Adam({"lr": 1e-2}), objective), model, guide
