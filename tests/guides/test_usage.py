"""The guide masks the dimension a weight's products sum over (its input units): the rows of a
weight used as ``x @ w`` (stored ``[in, out]``, NumPyro's ``examples/bnn.py``), the columns of
one used by ``F.linear`` or ``x @ w.T``; and the NumPyro example, written as there, predicts."""

from __future__ import annotations

import pyro
import pyro.distributions as dist
import pytest
import torch
import torch.nn.functional as F

from pyro_dropout import DropoutGuide, predict
from pyro_dropout.guides.usage import ProductWatch


@pytest.mark.parametrize(
    ("use", "shape", "dim"),
    [
        (lambda x, w: x @ w, (3, 4), -2),  # stored [in, out]: its rows are the inputs
        (lambda x, w: torch.matmul(x, w), (3, 4), -2),
        (lambda x, w: torch.einsum("ni,io->no", x, w), (3, 4), -2),
        (lambda x, w: x @ w.T, (4, 3), -1),  # stored [out, in]
        (lambda x, w: F.linear(x, w), (4, 3), -1),
        (lambda x, w: torch.einsum("ni,oi->no", x, w), (4, 3), -1),
        (lambda x, w: F.linear(x, w.t()), (3, 4), -2),
    ],
    ids=[
        "matmul-operator",
        "matmul",
        "einsum",
        "transposed",
        "linear",
        "einsum-out-in",
        "linear-of-transpose",
    ],
)
def test_the_watch_records_the_summed_dimension(use, shape, dim):
    x, w = torch.randn(5, 3), torch.randn(*shape)
    with ProductWatch() as watch:
        use(x, w)
    assert watch.contracted[id(w)] == dim


def bnn(x, y=None, hidden=5):
    """NumPyro's examples/bnn.py, written as there: weights [in, out], x @ w, shape asserts."""
    n, d_x = x.shape
    w1 = pyro.sample("w1", dist.Normal(torch.zeros((d_x, hidden)), torch.ones((d_x, hidden))).to_event(2))
    assert w1.shape == (d_x, hidden)
    z1 = torch.tanh(x @ w1)
    w2 = pyro.sample(
        "w2", dist.Normal(torch.zeros((hidden, hidden)), torch.ones((hidden, hidden))).to_event(2)
    )
    z2 = torch.tanh(z1 @ w2)
    w3 = pyro.sample("w3", dist.Normal(torch.zeros((hidden, 1)), torch.ones((hidden, 1))).to_event(2))
    z3 = z2 @ w3
    assert z3.shape == (n, 1)
    precision = pyro.sample("prec_obs", dist.Gamma(3.0, 1.0))
    with pyro.plate("data", n):
        return pyro.sample("Y", dist.Normal(z3.squeeze(-1), 1.0 / torch.sqrt(precision)), obs=y)


def test_the_numpyro_example_gets_masks_on_its_input_units_and_predicts():
    torch.manual_seed(0)
    x, y = torch.randn(12, 3), torch.randn(12)
    guide = DropoutGuide(bnn)
    guide(x, y)
    assert {k: guide._roles[k].mask_dim for k in ("w1", "w2", "w3")} == {"w1": -2, "w2": -2, "w3": -2}
    draw = guide.family("w1").rsample()
    dropped = (draw == 0).all(-1)  # a whole row (an input unit) at a time, or none of it
    assert torch.equal((draw == 0).any(-1), dropped)
    with pytest.warns(UserWarning, match="one at a time"):  # its asserts refuse batched draws
        pred = predict(bnn, guide, x, num_samples=6)
    assert pred["Y"].shape == (6, 12)
