"""Keras's MNIST CNN (paper 003 §5.2): its shapes, where its masks go, and that its convolutions
run once for every particle of a BB-α step."""

import pyro
import pytest
import torch
from pyro import poutine
from pyro.infer import SVI

from pyro_dropout import DropoutGuide, predict
from pyro_dropout.infer import BBAlpha
from pyro_dropout.nn import KerasCNN


def _setup(**kwargs):
    pyro.clear_param_store()
    pyro.set_rng_seed(0)
    model = KerasCNN(**kwargs)
    guide = DropoutGuide(model)
    x, y = torch.rand(6, 1, 28, 28), torch.randint(0, 10, (6,))
    guide(x, y)
    return model, guide, x, y


def test_the_layers_are_chollets_with_100_hidden_units_and_dropout_before_the_fc_layers_only():
    model, guide, x, _ = _setup()
    trace = poutine.trace(model).get_trace(x)
    shapes = {n: tuple(s["value"].shape) for n, s in trace.nodes.items() if n.endswith("weight")}
    assert shapes == {
        "conv1.weight": (32, 1, 3, 3),
        "conv2.weight": (32, 32, 3, 3),
        "fc1.weight": (100, 32 * 12 * 12),
        "fc2.weight": (10, 100),
    }
    rates = {k: float(v) for k, v in guide.dropout_rates().items()}
    assert rates == {"conv1.weight": 0.0, "conv2.weight": 0.0, "fc1.weight": 0.5, "fc2.weight": 0.5}


def test_draws_batch_and_their_probabilities_differ_only_through_the_fc_masks():
    model, guide, x, _ = _setup(filters=4, hidden=16)
    probs = predict(model, guide, x, num_samples=5).probs["obs"]
    assert probs.shape == (5, 6, 10) and torch.allclose(probs.sum(-1), torch.ones(5, 6))
    assert float(probs.std(0).max()) > 0  # the fc masks make the draws differ


def test_a_bbalpha_step_runs_the_convolutions_once_for_all_particles():
    model, guide, x, y = _setup(filters=4, hidden=16)
    shapes = []
    hook = model.conv2.register_forward_hook(lambda module, args, out: shapes.append(tuple(out.shape)))
    with pyro.plate("particles", 10, dim=-2):
        latents = poutine.trace(guide).get_trace(x, y)
        poutine.replay(model, trace=latents)(x, y)
    hook.remove()
    assert latents.nodes["fc1.weight"]["value"].shape[0] == 10  # ten masks of the fc layer
    assert shapes == [(6, 4, 24, 24)]  # one conv pass, broadcast over the particles
    svi = SVI(
        model, guide, pyro.optim.Adam({"lr": 1e-3}), BBAlpha(0.5, num_particles=10, per_example_masks=True)
    )
    assert torch.isfinite(torch.tensor(svi.step(x, y, num_data=100)))


def test_images_too_small_are_named():
    with pytest.raises(ValueError, match="KerasCNN: images of side 5"):
        KerasCNN(image_size=5)


def test_the_active_learning_network_has_4x4_kernels_and_a_rate_per_dense_layer():
    model = KerasCNN(kernel=4, hidden=128, dropout=(0.25, 0.5))
    assert model.fc1.in_features == 32 * 11 * 11  # 28 → 25 → 22 → pooled 11
    assert (model.fc1.dropout, model.fc2.dropout) == (0.25, 0.5)
    with pytest.raises(ValueError, match="kernel must be a positive int"):
        KerasCNN(kernel=0)
    with pytest.raises(ValueError, match="too small for 8x8 kernels"):
        KerasCNN(kernel=8, image_size=14)
