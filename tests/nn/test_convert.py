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
    # only the last layer is Bayesian; the dropout before a layer kept fixed stays the net's own module
    assert set(guide.dropout_rates()) == {"net.6.weight"}
    assert isinstance(model.net[2], nn.Dropout) and model.net[2].training
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
    with pytest.raises(
        ValueError, match="likelihood must be one of 'normal', 'heteroscedastic', 'categorical'"
    ):
        from_module(net, likelihood="poisson")
    with pytest.raises(ValueError, match="tau must be a positive finite number"):
        from_module(net, tau=0)
    with pytest.raises(
        ValueError, match=r"no nn\.Linear, nn\.Conv1d/2d/3d, nn\.LSTM or nn\.GRU layer.*no dropout"
    ):
        from_module(nn.Sequential(nn.ReLU()))
    with pytest.raises(ValueError, match=r"no nn\.Linear, nn\.Conv1d/2d/3d, nn\.LSTM or nn\.GRU layer"):
        from_module(nn.Sequential(nn.ReLU(), nn.Dropout(0.5)), masks="shared")  # its own masks only


def _conv_block():
    torch.manual_seed(3)
    net = nn.Sequential(
        nn.Conv2d(2, 4, 3, padding=1),
        nn.BatchNorm2d(4),
        nn.ReLU(),
        nn.Dropout2d(0.3),
        nn.Conv2d(4, 6, 3),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Dropout(0.2),
        nn.Linear(6, 3),
    )
    net[1].running_mean.uniform_(-1, 1)
    net[1].running_var.uniform_(0.5, 2)
    return net


def _fixed_mask(keep, p):
    """An nn.Dropout forward with a given keep mask over the units (features or channels)."""

    def forward(x):
        return x * keep.reshape(keep.shape + (1,) * (x.dim() - 2)) / (1 - p)

    return forward


@pytest.mark.parametrize(
    ("make", "x", "feeds"),
    [
        (_mlp, torch.randn(10, 4), {"net.3.weight": 2, "net.6.weight": 5}),
        (_lenet, torch.randn(6, 1, 8, 8), {"net.8.weight": 7}),
        (_conv_block, torch.randn(5, 2, 6, 6), {"net.4.weight": 3, "net.9.weight": 8}),
    ],
    ids=["mlp", "lenet-batchnorm", "conv-block-batchnorm"],
)
def test_an_mc_pass_equals_the_network_with_the_same_masks(make, x, feeds):
    """With masks="shared", one draw of the guide is the network in train mode with its dropouts'
    masks fixed to the draw's (batch norm on its running statistics in both): W = M diag(z)/(1-p)
    drops the same units as nn.Dropout's mask z on the layer's inputs."""
    net = make()
    model = from_module(net, likelihood="categorical", masks="shared")
    guide = DropoutGuide(model)
    guide(x, torch.zeros(len(x), dtype=torch.long))
    pyro.set_rng_seed(4)
    for _ in range(100):  # a draw that drops some unit, so the check is not of the mean alone
        trace = pyro.poutine.trace(guide).get_trace(x)
        keeps = {s: guide.family(s).keep_from_value(trace.nodes[s]["value"])[0].round() for s in feeds}
        if any(bool((k == 0).any()) for k in keeps.values()):
            break
    logits = pyro.poutine.trace(pyro.poutine.replay(model, trace)).get_trace(x).nodes["logits"]["value"]
    net.eval()
    for site, index in feeds.items():
        net[index].forward = _fixed_mask(keeps[site], net[index].p)
    assert torch.allclose(logits, net(x), atol=1e-5)


class _FunctionalDropout(nn.Module):
    def __init__(self, always=False):
        super().__init__()
        self.a, self.b, self.always = nn.Linear(4, 16), nn.Linear(16, 3), always

    def forward(self, x):
        h = torch.relu(self.a(x))
        h = torch.nn.functional.dropout(h, 0.3, training=True if self.always else self.training)
        return self.b(h)


@pytest.mark.parametrize("masks", ["own", "shared"])
def test_a_functional_dropout_in_the_forward_sets_the_next_layers_rate_and_is_removed(masks):
    """Its rate is the next layer's (with masks="own" the KL's; the call stays in the forward); the
    expected weights switch it off, even one left on in eval mode."""
    torch.manual_seed(5)
    x = torch.randn(7, 4)
    for always in (False, True):  # F.dropout(h, p) left on in eval mode
        pyro.clear_param_store()  # the guides' parameters share names in Pyro's param store
        net = _FunctionalDropout(always)
        model = from_module(net, likelihood="categorical", masks=masks)
        guide = DropoutGuide(model)
        guide(x, torch.zeros(7, dtype=torch.long))
        assert {k: round(float(v), 6) for k, v in guide.dropout_rates().items()} == {
            "net.a.weight": 0.0,
            "net.b.weight": 0.3,
        }
        standard = predict_standard(model, guide, x).samples["logits"][0]
        assert torch.allclose(standard, net.b(torch.relu(net.a(x))), atol=1e-6)


def test_conv1d_and_conv3d_convert_and_an_untraceable_forward_is_named():
    torch.manual_seed(6)
    conv1d = nn.Sequential(nn.Conv1d(2, 3, 3), nn.ReLU(), nn.Flatten(), nn.Dropout(0.1), nn.Linear(12, 2))
    conv3d = nn.Sequential(nn.Conv3d(1, 2, 2), nn.ReLU(), nn.Flatten(), nn.Linear(16, 2))
    for net, x in ((conv1d, (5, 2, 6)), (conv3d, (3, 1, 3, 3, 3))):
        pyro.clear_param_store()
        x = torch.randn(*x)
        model = from_module(net, likelihood="categorical")
        guide = DropoutGuide(model, dropout=None if net is conv1d else 0.2)  # conv1d: its own dropout
        guide(x, torch.zeros(len(x), dtype=torch.long))
        standard = predict_standard(model, guide, x).samples["logits"][0]
        assert torch.allclose(standard, net.eval()(x), atol=1e-6)
        assert predict(model, guide, x, num_samples=4).probs["obs"].shape == (4, len(x), 2)

    class Branchy(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 2)

        def forward(self, x):
            return self.fc(x) if x.sum() > 0 else -self.fc(x)

    with pytest.warns(UserWarning, match="could not trace the forward of Branchy"):
        from_module(Branchy(), masks="shared")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert from_module(Branchy()).untraced  # its own dropout as written: nothing to warn of


def test_a_network_that_is_one_layer_converts_and_a_tuple_output_is_named():
    """Before, a bare ``nn.Linear`` was refused as a weight "used outside its module's forward",
    and a bare ``nn.LSTM`` (its forward returns a tuple) raised a raw KeyError."""
    torch.manual_seed(3)
    net, x, y = nn.Linear(5, 3), torch.randn(6, 5), torch.randint(0, 3, (6,))
    model = from_module(net, likelihood="categorical")
    guide = DropoutGuide(model, dropout=0.1)
    guide(x, y)
    assert set(guide.dropout_rates()) == {"net.0.weight"}
    assert torch.allclose(predict_standard(model, guide, x).probs["obs"][0], net(x).softmax(-1), atol=1e-6)
    lstm = from_module(nn.LSTM(4, 8), likelihood="categorical")
    with pytest.raises(TypeError, match=r"forward returned a tuple, not a tensor.*wrap the network"):
        DropoutGuide(lstm, dropout=0.1)(torch.randn(6, 3, 4), torch.randint(0, 3, (6,)))
