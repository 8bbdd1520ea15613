"""from_module at its edges: a weight computed by a norm, a network of several inputs. Each is
refused by name, with the way on, and the way on converts exactly (tolerance 1e-6, float32)."""

import warnings

import pytest
import torch
from torch import nn

from pyro_dropout import DropoutGuide, predict, predict_standard
from pyro_dropout.nn import from_module


def _normed(kind):
    torch.manual_seed(4)
    first, last = nn.Linear(5, 8), nn.Linear(8, 3)
    if kind == "parametrization":
        first = nn.utils.parametrizations.weight_norm(first)
        last = nn.utils.parametrizations.spectral_norm(last)
    else:  # the hook-based forms torch deprecates
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            first = nn.utils.weight_norm(first)
    return nn.Sequential(first, nn.ReLU(), nn.Dropout(0.2), nn.Linear(8, 8), nn.ReLU(), last).eval()


@pytest.mark.parametrize("kind", ["parametrization", "hook"])
def test_a_weight_computed_by_a_norm_is_refused_by_name_and_its_fixes_are_exact(kind):
    """Before: a parametrized layer failed with Pyro's "submodule net has executed outside of
    supermodule", a hook-based weight_norm with torch's deepcopy error. A sample site is the weight
    itself, so the norm cannot be kept: the error names the layer and both ways on."""
    net, x, y = _normed(kind), torch.randn(6, 5), torch.randint(0, 3, (6,))
    fix = (
        r"remove_parametrizations\(net.get_submodule\('0'\), 'weight'\)"
        if kind != "hook"
        else "remove_weight_norm"
    )
    keep = r"keep=\['0', '5'\]" if kind == "parametrization" else r"keep=\['0'\]"  # every such layer at once
    with pytest.raises(ValueError, match=rf"'0'.*(parametrization|weight_norm).*{fix}.*{keep}"):
        from_module(net, likelihood="categorical")
    if kind == "parametrization":  # kept deterministic, each norm layer: exact
        model = from_module(net, likelihood="categorical", keep=["0", "5"])
        guide = DropoutGuide(model)
        guide(x, y)
        expected = predict_standard(model, guide, x).probs["obs"][0]
        assert torch.allclose(expected, net(x).softmax(-1), atol=1e-6)
    baked = _normed(kind)
    for i in (0, 5):
        if nn.utils.parametrize.is_parametrized(baked[i]):
            nn.utils.parametrize.remove_parametrizations(baked[i], "weight")
    if kind == "hook":
        nn.utils.remove_weight_norm(baked[0])
    model = from_module(baked, likelihood="categorical")
    guide = DropoutGuide(model)
    guide(x, y)
    assert torch.allclose(predict_standard(model, guide, x).probs["obs"][0], net(x).softmax(-1), atol=1e-6)


class _TwoInputs(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(5)
        self.a, self.b, self.drop, self.out = (
            nn.Linear(3, 8),
            nn.Linear(2, 8),
            nn.Dropout(0.1),
            nn.Linear(16, 2),
        )

    def forward(self, x1, x2):
        return self.out(self.drop(torch.relu(torch.cat([self.a(x1), self.b(x2)], -1))))


def test_a_network_of_several_inputs_takes_them_as_its_forward_does():
    """Before: a tuple of inputs was refused ("convert a wrapper module whose forward takes one
    tensor"). Now a tuple is the forward's positional inputs and a dict its keyword inputs; the
    expected weights give the network in eval mode either way, and a list is refused by name."""
    from pyro_dropout import MCDropout

    net = _TwoInputs().eval()
    x1, x2, y = torch.randn(6, 3), torch.randn(6, 2), torch.randint(0, 2, (6,))
    model = from_module(net, likelihood="categorical")
    guide = DropoutGuide(model)
    guide((x1, x2), y)
    assert guide.dropout_rates()["net.out.weight"] == pytest.approx(0.1)
    for given in ((x1, x2), {"x1": x1, "x2": x2}, {"x2": x2, "x1": x1}):
        probs = predict_standard(model, guide, given).probs["obs"][0]
        assert torch.allclose(probs, net(x1, x2).softmax(-1), atol=1e-6)
    with pytest.raises(
        TypeError, match=r"x is a list of 2 tensors; give a network of several inputs a tuple"
    ):
        predict(model, guide, [x1, x2], num_samples=2)
    with pytest.raises(TypeError, match=r"MCDropout.predict: x is a list of 2 tensors"):
        MCDropout(net, "classification").predict([x1, x2])
    with pytest.raises(ValueError, match=r"the inputs \['x3'\] are not arguments of _TwoInputs.forward"):
        MCDropout(net, "classification").predict({"x1": x1, "x3": x2})
    draws = MCDropout(net, "classification", num_samples=5).predict((x1, x2)).probs["obs"]
    assert draws.shape == (5, 6, 2)
