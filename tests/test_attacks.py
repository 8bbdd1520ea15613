"""Gradient-sign attacks: the step against a hand computation on a linear softmax model, the
attacked predictive against predict's, and clear errors for bad arguments."""

import pyro
import pytest
import torch

from pyro_dropout.attacks import fgs, iterative_fgs, predictive_log_probs
from pyro_dropout.guides import DropoutGuide
from pyro_dropout.nn import MLP, from_module
from pyro_dropout.prediction import predict


def _fitted(dropout, hidden=()):
    """A softmax model on 4 features with its guide set up (and its means moved off their start)."""
    pyro.clear_param_store()
    pyro.set_rng_seed(0)
    model = MLP(4, 3, hidden=hidden, likelihood="categorical")
    guide = DropoutGuide(model, dropout=dropout)
    x, y = torch.rand(6, 4), torch.tensor([0, 1, 2, 0, 1, 2])
    guide(x, y)
    with torch.no_grad():
        for value in pyro.get_param_store().values():
            value.unconstrained().copy_(torch.randn_like(value))
    return model, guide, x


def _linear(guide):
    medians = guide.median()
    return medians["output.weight"], medians["output.bias"]


def test_untargeted_step_is_minus_eta_sign_of_the_predicted_class_gradient():
    model, guide, x = _fitted(0.0)
    w, b = _linear(guide)
    p = (x @ w.T + b).softmax(-1)
    top = p.argmax(-1)
    grad = w[top] - p @ w  # d/dx log softmax(xW^T + b)[top]
    expected = (x - 0.1 * grad.sign()).clamp(0, 1)
    assert torch.allclose(fgs(model, guide, x, eta=0.1, num_samples=3), expected)


def test_targeted_step_is_plus_eta_sign_of_the_target_gradient_and_raises_its_probability():
    model, guide, x = _fitted(0.0)
    w, b = _linear(guide)
    p = (x @ w.T + b).softmax(-1)
    expected = x + 0.05 * (w[2] - p @ w).sign()  # no clipping
    attacked = fgs(model, guide, x, eta=0.05, target=2, bounds=None)
    assert torch.allclose(attacked, expected)
    assert bool(((attacked @ w.T + b).softmax(-1)[:, 2] > p[:, 2]).all())


def test_the_attacked_quantity_is_the_log_of_predicts_mean_probabilities_for_the_same_draws():
    model, guide, x = _fitted(0.5, hidden=(20,))
    pyro.set_rng_seed(3)
    attacked = predictive_log_probs(model, guide, x, num_samples=16)
    pyro.set_rng_seed(3)
    probs = predict(model, guide, x, num_samples=16, chunk_size=None).probs["obs"]
    assert torch.allclose(attacked, probs.mean(0).log(), atol=1e-5)
    one = predictive_log_probs(model, guide, x, num_samples=1)  # one pass: a different function
    assert not torch.allclose(one, attacked, atol=1e-3)


def test_iterative_attack_yields_each_step_inside_the_bounds_and_moves_toward_the_target():
    model, guide, x = _fitted(0.5, hidden=(20,))
    pyro.set_rng_seed(1)
    steps = list(iterative_fgs(model, guide, x, target=1, eta=0.05, steps=6, num_samples=8))
    assert len(steps) == 6 and all(s.shape == x.shape for s in steps)
    assert all(float(s.min()) >= 0 and float(s.max()) <= 1 for s in steps)
    moves = [float((b - a).abs().max()) for a, b in zip([x, *steps[:-1]], steps, strict=True)]
    assert max(moves) <= 0.05 + 1e-6
    before = predictive_log_probs(model, guide, x, num_samples=200)[:, 1].mean()
    after = predictive_log_probs(model, guide, steps[-1], num_samples=200)[:, 1].mean()
    assert after > before


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"eta": -0.1}, "eta must be a finite number >= 0"),
        ({"eta": float("nan")}, "eta must be a finite number >= 0"),
        ({"eta": 0.1, "target": 3}, r"target must be a class in \[0, 3\)"),
        ({"eta": 0.1, "target": torch.tensor([0, 1])}, "one per input"),
        ({"eta": 0.1, "bounds": (1.0, 0.0)}, "bounds must be"),
        ({"eta": 0.1, "num_samples": 0}, "num_samples must be a positive int"),
        ({"eta": 0.1, "site": "nope"}, "site 'nope' is not a sample site"),
    ],
)
def test_bad_arguments_are_named(kwargs, message):
    model, guide, x = _fitted(0.0)
    with pytest.raises(ValueError, match=message):
        fgs(model, guide, x, **kwargs)


def test_bad_inputs_and_models_are_named():
    model, guide, x = _fitted(0.0)
    with pytest.raises(ValueError, match="NaN or infinite"):
        fgs(model, guide, torch.full_like(x, float("nan")), eta=0.1)
    with pytest.raises(TypeError, match="floating-point tensor"):
        fgs(model, guide, x.long(), eta=0.1)
    with pytest.raises(TypeError, match="class index"):
        fgs(model, guide, x, eta=0.1, target=0.5)
    with pytest.raises(ValueError, match="steps must be a positive int"):
        next(iterative_fgs(model, guide, x, target=0, steps=0))
    pyro.clear_param_store()  # the two guides would share parameter names
    regression = MLP(4, 1, hidden=(5,))
    regression_guide = DropoutGuide(regression)
    regression_guide(x, torch.randn(6))
    with pytest.raises(ValueError, match="not a categorical likelihood"):
        fgs(regression, regression_guide, x, eta=0.1)


def test_a_converted_torch_network_is_attacked_like_any_model():
    pyro.clear_param_store()
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Linear(4, 16), torch.nn.ReLU(), torch.nn.Dropout(0.2), torch.nn.Linear(16, 3)
    )
    model = from_module(net, likelihood="categorical")
    guide = DropoutGuide(model)
    x = torch.rand(5, 4)
    guide(x, torch.randint(0, 3, (5,)))
    # the gradient of the MC predictive, over 100 draws of the network's own dropout (4 draws, each
    # a new mask per row, leave its sign to chance on this small net)
    attacked = fgs(model, guide, x, eta=0.1, num_samples=100)
    assert attacked.shape == x.shape and float((attacked - x).abs().max()) <= 0.1 + 1e-6
    with torch.no_grad():
        before = predictive_log_probs(model, guide, x, num_samples=400).max(-1).values
        after = predictive_log_probs(model, guide, attacked, num_samples=400).max(-1).values
    assert float((after - before).mean()) < 0  # the predicted class lost probability
