"""Sites declare their own drop probability; the guide's defaults never mask a network's only
input; weights the guide would silently leave unmasked are named in a warning."""

import warnings
from pathlib import Path

import pyro
import pyro.distributions as dist
import pytest
import torch

from pyro_dropout import DropoutGuide, QuantisedGaussian
from pyro_dropout.distributions import BernoulliDropout
from pyro_dropout.nn import Linear
from pyro_dropout.nn.functional import linear
from pyro_dropout.nn.masking import per_example_masks


class _Net(pyro.nn.PyroModule):
    def __init__(self, inputs=3, first=None):
        super().__init__()
        self.fc1 = Linear(inputs, 8, dropout=first)
        self.fc2 = Linear(8, 1)

    def forward(self, x, y=None):
        mu = self.fc2(torch.relu(self.fc1(x))).squeeze(-1)
        with pyro.plate("data", x.shape[-2]):
            return pyro.sample("obs", dist.Normal(mu, 0.1), obs=y)


def _rates(guide, inputs=3):
    guide(torch.randn(5, inputs), torch.randn(5))
    return {k: round(float(v), 6) for k, v in guide.dropout_rates().items()}


def test_a_layer_declares_its_rate_and_the_guide_can_override_it():
    assert _rates(DropoutGuide(_Net(first=0.3))) == {"fc1.weight": 0.3, "fc2.weight": 0.1}
    assert _rates(DropoutGuide(_Net(first=0.3), dropout=0.05)) == {"fc1.weight": 0.05, "fc2.weight": 0.05}
    concrete = DropoutGuide(_Net(first=0.3), concrete=True)  # declared rates start the learned ones
    assert _rates(concrete) == {"fc1.weight": 0.3, "fc2.weight": 0.1}
    with pytest.raises(ValueError, match=r"Linear: dropout: dropout probability must lie in \[0, 1\)"):
        Linear(3, 2, dropout=1.0)


def test_a_raw_site_declares_its_rate_in_infer():
    def model(x, y=None):
        w = pyro.sample("w", QuantisedGaussian(0.0, 1.0).expand([1, 3]).to_event(2), infer={"dropout": 0.25})
        with pyro.plate("data", x.shape[-2]):
            return pyro.sample("obs", dist.Normal(linear(x, w).squeeze(-1), 0.1), obs=y)

    assert _rates(DropoutGuide(model)) == {"w": 0.25}


def test_the_default_never_masks_a_networks_only_input():
    """A weight with one input unit masked with p drops the whole input in a fraction p of the
    draws: those draws are constant functions (DESIGN trap 11). The default gives it 0."""
    with pytest.warns(UserWarning, match="the default rates mask no site") as caught:
        rates = _rates(DropoutGuide(_OneInput()), inputs=1)
    assert rates == {"fc.weight": 0.0}
    # the warning names the user's line that set the guide up, not a line inside the library or Pyro
    assert [Path(w.filename).name for w in caught] == [Path(__file__).name]
    assert _rates(DropoutGuide(_Net(inputs=1)), inputs=1) == {"fc1.weight": 0.0, "fc2.weight": 0.1}
    assert _rates(DropoutGuide(_Net(inputs=1), dropout=0.1), inputs=1)["fc1.weight"] == 0.1  # if asked


class _OneInput(pyro.nn.PyroModule):
    def __init__(self):
        super().__init__()
        self.fc = Linear(1, 1)

    def forward(self, x, y=None):
        mu = self.fc(x).squeeze(-1)
        with pyro.plate("data", x.shape[-2]):
            return pyro.sample("obs", dist.Normal(mu, 0.1), obs=y)


def test_a_weight_declared_to_event_1_is_named():
    def model(x, y=None):
        w = pyro.sample("w", QuantisedGaussian(0.0, 1.0).expand([4, 3]).to_event(1))
        v = pyro.sample("v", QuantisedGaussian(0.0, 1.0).expand([1, 4]).to_event(2))
        with pyro.plate("data", x.shape[-2]):
            mu = linear(torch.relu(linear(x, w)), v).squeeze(-1)
            return pyro.sample("obs", dist.Normal(mu, 0.1), obs=y)

    with pytest.warns(
        UserWarning, match=r"site 'w' has shape \(4, 3\) with event_dim 1: .*declare it .to_event\(2\)"
    ):
        _rates(DropoutGuide(model))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a well-declared model warns nothing
        _rates(DropoutGuide(_Net()))


def test_values_before_set_up_say_how_to_set_up():
    with pytest.raises(RuntimeError, match=r"observations included \(guide\(x, y\)\)"):
        DropoutGuide(_Net()).dropout_rates()


def _x_at_w(dim):
    """Weights stored [in, out] and used as x @ W (the NumPyro bnn.py convention)."""

    def model(x, y=None):
        infer = {} if dim is None else {"dropout_dim": dim}
        w1 = pyro.sample("w1", dist.Normal(0.0, 1.0).expand([3, 6]).to_event(2), infer=infer)
        w2 = pyro.sample("w2", dist.Normal(0.0, 1.0).expand([6, 1]).to_event(2), infer=infer)
        with pyro.plate("data", x.shape[-2]):
            return pyro.sample("obs", dist.Normal((torch.relu(x @ w1) @ w2).squeeze(-1), 0.1), obs=y)

    return model


def test_a_weight_stored_in_out_declares_its_mask_axis():
    """dropout_dim=-2 masks rows (the inputs of x @ W): a whole row is zero in a fraction p of
    draws, no column ever is; the KL's entropy counts the masked units (6, not 1)."""
    guide = DropoutGuide(_x_at_w(-2))
    assert _rates(guide) == {"w1": 0.1, "w2": 0.1}  # w2 has 6 inputs: the default rate, not 0
    q = guide.family("w2")
    assert (q.mask_dim, q.num_units) == (-2, 6)
    pyro.set_rng_seed(0)
    draws = q.rsample((4000,))
    assert float((draws == 0).all(-1).float().mean()) == pytest.approx(0.1, abs=0.015)  # 3 sd
    assert not bool((draws == 0).all(-2).any())
    assert guide.family("w1").num_units == 3


def test_a_bad_mask_axis_and_per_example_masks_are_named():
    with pytest.raises(ValueError, match=r"site 'w1': infer\['dropout_dim'\]: .* got 2"):
        _rates(DropoutGuide(_x_at_w(2)))
    guide = DropoutGuide(_Net())
    _rates(guide)
    q = guide.family("fc1.weight")
    assert q.mask_dim == -1  # a layer's [out, in] weight: its inputs, the default
    odd = BernoulliDropout(q.loc, 0.1, mask_dim=-2)
    with per_example_masks({"fc1.weight": (odd, q.loc)}):
        with pytest.raises(ValueError, match=r"site 'fc1.weight': per-example masks .* dropout_dim=-2"):
            linear(torch.randn(5, 3), q.loc)
