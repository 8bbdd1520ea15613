"""Bad arguments to DropoutGuide get a clear error naming them (each a silent wrong answer or a
raw torch error before)."""

import pyro
import pyro.distributions as dist
import pytest
import torch

from pyro_dropout import DropoutGuide
from pyro_dropout.nn import MLP


def _set_up(guide, model):
    x, y = torch.randn(4, 3), torch.randn(4)
    guide(x, y)
    return model


def test_point_estimates_must_name_sites_of_the_model():
    model = MLP(3, hidden=(5,))
    # a string was read as characters ("h", "i", ...) and the site kept its dropout
    with pytest.raises(
        TypeError, match=r"point_estimates must be a list of site names.*write \['hidden.0.weight'\]"
    ):
        DropoutGuide(model, point_estimates="hidden.0.weight")
    guide = DropoutGuide(model, point_estimates=["hidden.0.wieght"])  # a typo was ignored
    with pytest.raises(
        ValueError, match=r"point_estimates given for sites not in the model: \['hidden.0.wieght'\]"
    ):
        _set_up(guide, model)
    guide = DropoutGuide(MLP(3, hidden=(5,)), point_estimates=["hidden.0.weight"])
    _set_up(guide, model)
    assert (
        "hidden.0.weight" not in guide.dropout_rates() or float(guide.dropout_rates()["hidden.0.weight"]) == 0
    )


@pytest.mark.parametrize("bad", ["0.1", [0.1], True])
def test_a_rate_that_is_not_a_number_is_named(bad):
    with pytest.raises(
        TypeError, match=r"DropoutGuide: dropout: a dropout probability must be a number or a tensor"
    ):
        DropoutGuide(MLP(3), dropout=bad)


@pytest.mark.parametrize("bad", ["0.1", [0.1], None])
def test_a_callable_returning_a_non_number_is_named_with_its_site(bad):
    guide = DropoutGuide(MLP(3, hidden=(5,)), dropout=lambda name, site: bad)
    with pytest.raises(TypeError, match=r"dropout for site 'hidden.0.weight': a dropout probability must be"):
        _set_up(guide, None)


def test_a_rate_that_rounds_to_one_in_the_models_dtype_is_refused():
    """1 - 1e-9 passes the < 1 check in float64 but is 1.0 in a float32 model (NaN weights)."""
    rate = torch.tensor(1 - 1e-9, dtype=torch.float64)
    guide = DropoutGuide(MLP(3, hidden=(5,)), dropout=rate)
    with pytest.raises(ValueError, match=r"rounds to 1 in the model's torch.float32"):
        _set_up(guide, None)
    torch.set_default_dtype(torch.float64)  # the same rate is fine in a float64 model
    model = MLP(3, hidden=(5,))
    guide = DropoutGuide(model, dropout=rate)
    guide(torch.randn(4, 3), torch.randn(4))


def test_a_model_with_no_latent_sites_is_refused():
    def model(x, y=None):
        with pyro.plate("data", x.shape[0]):
            pyro.sample("obs", dist.Normal(x[:, 0], 1.0), obs=y)

    guide = DropoutGuide(model)
    with pytest.raises(ValueError, match="the model has no latent sample sites, so there is nothing to fit"):
        guide(torch.randn(4, 3), torch.randn(4))


def test_a_layer_called_inside_the_data_plate_is_refused_with_the_way_out():
    """Each data point would get weights of its own (before: a shape error at the likelihood
    with vectorised particles, and with one particle no error at all, a different model)."""
    from pyro_dropout.nn import Linear

    class Inside(pyro.nn.PyroModule):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = Linear(3, 5), Linear(5, 2)

        def forward(self, x, y=None):
            h = torch.relu(self.fc1(x))
            with pyro.plate("data", x.shape[-2]):
                return pyro.sample("y", dist.Categorical(logits=self.fc2(h)), obs=y)

    guide = DropoutGuide(Inside())
    with pytest.raises(
        ValueError, match=r"'fc2.weight' is drawn inside plate 'data'.*observed site 'y'.*before"
    ):
        guide(torch.randn(4, 3), torch.randint(0, 2, (4,)))


def test_weights_in_a_plate_of_runs_outside_the_data_plate_are_kept():
    """A plate that holds the weights and the data (independent runs) is not the data plate."""
    model = MLP(3, hidden=(5,), runs=2)
    guide = DropoutGuide(model)
    guide(torch.randn(2, 4, 3), torch.randn(2, 4))
    assert "y" not in guide.prototype_trace.nodes and "obs" not in guide.prototype_trace.nodes
    assert guide.dropout_rates()
