"""from_module: a trained torch network becomes a dropout posterior, its weights the starting
means and its nn.Dropout rates the masks' (tolerance 1e-6: the same arithmetic, float32)."""

import warnings

import pyro
import pytest
import torch
from pyro.infer import SVI
from torch import nn

from pyro_dropout import DropoutELBO, DropoutGuide, evaluate, predict, predict_standard
from pyro_dropout.nn import from_module


def _mlp():
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(4, 32),
        nn.ReLU(),
        nn.Dropout(0.2),
        nn.Linear(32, 32),
        nn.ReLU(),
        nn.Dropout(0.5),
        nn.Linear(32, 3),
    )


def _lenet():
    torch.manual_seed(1)
    net = nn.Sequential(
        nn.Conv2d(1, 4, 3),
        nn.BatchNorm2d(4),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(36, 16),
        nn.ReLU(),
        nn.Dropout(0.5),
        nn.Linear(16, 3),
    )
    net[1].running_mean.uniform_(-1, 1)  # as if trained: batch norm's statistics matter
    net[1].running_var.uniform_(0.5, 2)
    return net


@pytest.mark.parametrize(
    ("make", "x", "rates"),
    [
        (_mlp, torch.randn(10, 4), {"net.0.weight": 0.0, "net.3.weight": 0.2, "net.6.weight": 0.5}),
        (_lenet, torch.randn(6, 1, 8, 8), {"net.0.weight": 0.0, "net.5.weight": 0.0, "net.8.weight": 0.5}),
    ],
    ids=["mlp", "lenet-batchnorm"],
)
def test_a_trained_network_converts_exactly(make, x, rates):
    net = make()
    y = torch.randint(0, 3, (len(x),))
    model = from_module(net, likelihood="categorical")
    guide = DropoutGuide(model)
    guide(x, y)
    assert {k: round(float(v), 6) for k, v in guide.dropout_rates().items()} == rates
    expected = predict_standard(model, guide, x).samples["logits"][0]
    assert torch.allclose(expected, net.eval()(x), atol=1e-6)  # the expected weights are the net's
    pred = predict(model, guide, x, num_samples=20)  # MC dropout at once, batched over draws
    assert pred.probs["obs"].shape == (20, len(x), 3) and torch.isfinite(pred.probs["obs"]).all()
    assert 0 <= evaluate(model, guide, x, y, num_samples=20).accuracy <= 1
    assert net.training is False and isinstance(net[0], nn.Linear | nn.Conv2d)  # the net is unchanged


def test_the_converted_model_refines_by_svi_and_keeps_the_rest_fixed_with_last_layer():
    net = _mlp()
    x, y = torch.randn(40, 4), torch.randint(0, 3, (40,))
    model = from_module(net, likelihood="categorical", last_layer=True)
    guide = DropoutGuide(model)
    svi = SVI(model, guide, pyro.optim.Adam({"lr": 1e-2}), DropoutELBO())
    losses = [svi.step(x, y) for _ in range(30)]
    assert all(torch.isfinite(torch.tensor(losses)))
    assert set(guide.dropout_rates()) == {"net.6.weight"}  # only the last layer is Bayesian
    assert torch.equal(model.net[0].weight, net[0].weight)  # the others keep the trained weights


def test_a_regression_network_and_bad_arguments():
    torch.manual_seed(2)
    net = nn.Sequential(nn.Linear(3, 16), nn.ReLU(), nn.Linear(16, 1))
    x, y = torch.randn(8, 3), torch.randn(8)
    model = from_module(net, tau=4.0)
    with warnings.catch_warnings(record=True) as caught:  # no nn.Dropout: nothing to mask, said once
        warnings.simplefilter("always")
        guide = DropoutGuide(model)
        guide(x, y)
    assert any("mask no site" in str(w.message) for w in caught)
    assert torch.allclose(predict_standard(model, guide, x).samples["mean"][0], net(x).squeeze(-1), atol=1e-6)
    with pytest.raises(ValueError, match="likelihood must be 'normal' or 'categorical'"):
        from_module(net, likelihood="poisson")
    with pytest.raises(ValueError, match="tau must be a positive finite number"):
        from_module(net, tau=0)
    with pytest.raises(ValueError, match=r"no nn\.Linear or nn\.Conv2d layer"):
        from_module(nn.Sequential(nn.ReLU()))
