"""The papers' MLP classifiers: their shapes, priors, and draws batched as MLP's are."""

import math

import pyro
import pytest
import torch

from pyro_dropout import DropoutGuide, predict
from pyro_dropout.nn import concrete_mlp, small_mlp


def _sites(model, x):
    trace = pyro.poutine.trace(model).get_trace(x)
    return {name: site for name, site in trace.nodes.items() if name.endswith("weight")}


def test_concrete_mlp_scales_its_prior_with_the_fan_in():
    model = concrete_mlp(32, 3, in_features=20, classes=4, length_scale=1e-2)
    sites = _sites(model, torch.randn(5, 20))
    assert [tuple(s["value"].shape) for s in sites.values()] == [(32, 20), (32, 32), (32, 32), (4, 32)]
    # prior sd 1/l per weight, with l = 1e-2 * sqrt(fan-in): 1/(1e-2 * sqrt(20)) for the first layer
    scales = [float(s["fn"].base_dist.scale.flatten()[0]) for s in sites.values()]
    assert scales == pytest.approx([1 / (1e-2 * math.sqrt(k)) for k in (20, 32, 32, 32)], rel=1e-6)


def test_small_mlp_is_the_2x100_network_with_l2_of_one_tenth_and_batches_its_draws():
    model = small_mlp(in_features=12, classes=3)
    sites = _sites(model, torch.randn(5, 12))
    assert [tuple(s["value"].shape) for s in sites.values()] == [(100, 12), (100, 100), (3, 100)]
    assert float(next(iter(sites.values()))["fn"].base_dist.scale.flatten()[0]) == pytest.approx(0.1**-0.5)
    guide = DropoutGuide(model, dropout=0.5)
    x, y = torch.randn(8, 12), torch.randint(0, 3, (8,))
    guide(x, y)
    probs = predict(model, guide, x, num_samples=7).probs["obs"]
    assert probs.shape == (7, 8, 3) and torch.allclose(probs.sum(-1), torch.ones(7, 8))


@pytest.mark.parametrize("bad", [0, -1, 2.5, True])
def test_bad_sizes_are_named(bad):
    with pytest.raises(ValueError, match="small_mlp: width"):
        small_mlp(bad)
    with pytest.raises(ValueError, match="concrete_mlp: depth"):
        concrete_mlp(8, bad)
    with pytest.raises(ValueError, match="length_scale"):
        concrete_mlp(8, 1, length_scale=-1.0)


def test_lenet_and_kerascnn_take_one_num_data():
    """The data set's size, given once, sets LeNet's priors and scales a labelled minibatch; another
    one in the forward is refused, as is a size that is not one (before: -5 gave a finite loss from
    a negatively scaled likelihood, 0 was read as None)."""
    import pyro
    from pyro import poutine

    from pyro_dropout.nn import KerasCNN, LeNet

    x, y = torch.randn(4, 1, 28, 28), torch.randint(0, 10, (4,))
    model = LeNet(num_data=100)
    trace = poutine.trace(model).get_trace(x, y)
    assert trace.nodes["obs"]["scale"] == 25.0  # 100 / 4
    with pytest.raises(ValueError, match=r"built for num_data=100.*build LeNet\(num_data=50\)"):
        model(x, y, num_data=50)
    for bad in (-5, 0, 2.5, True):
        with pytest.raises(ValueError, match="num_data must be a whole number >= 1"):
            LeNet(num_data=bad)
    cnn = KerasCNN(num_data=8)
    assert poutine.trace(cnn).get_trace(x, y).nodes["obs"]["scale"] == 2.0
    with pytest.raises(ValueError, match=r"num_data=2 is smaller than the 4 labelled rows"):
        KerasCNN(num_data=2)(x, y)
    with pytest.raises(ValueError, match=r"dropout must be one rate or a pair .* got \(0.25,\)"):
        KerasCNN(dropout=(0.25,))  # "not enough values to unpack" before
    pyro.clear_param_store()
    assert poutine.trace(model).get_trace(torch.randn(300, 1, 28, 28)).nodes["obs"]["value"].shape == (300,)


def test_lenet_names_images_of_another_shape():
    """Before: "linear: input has 1250 features ... expects 800" from inside the network."""
    from pyro_dropout.nn import LeNet

    model = LeNet(num_data=10)
    with pytest.raises(
        ValueError, match=r"LeNet: built for images \[N, 1, 28, 28\], got x of shape \(4, 1, 32, 32\)"
    ):
        model.logits(torch.randn(4, 1, 32, 32))
    assert LeNet(num_data=10, image_size=32).logits(torch.randn(4, 1, 32, 32)).shape[-1] == 10
