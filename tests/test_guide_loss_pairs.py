"""Every guide x loss pair: a real SVI step and a vectorised Predictive call with checked shapes."""

import math

import pyro
import pytest
import torch
from pyro.infer import SVI, Predictive

from pyro_dropout import BBAlpha, DropoutELBO, DropoutGuide
from pyro_dropout.nn import MLP

GUIDES = {
    "bernoulli": lambda m: DropoutGuide(m, dropout=0.2),
    "concrete": lambda m: DropoutGuide(m, concrete=True),
}
LOSSES = {
    "elbo": lambda: DropoutELBO(),
    "elbo-4": lambda: DropoutELBO(num_particles=4),
    "elbo-4-sequential": lambda: DropoutELBO(num_particles=4, vectorize_particles=False),
    "bbalpha": lambda: BBAlpha(0.5, num_particles=5),
    "bbalpha-sequential": lambda: BBAlpha(1.0, num_particles=3, vectorize_particles=False),
}


@pytest.mark.parametrize("loss_name", sorted(LOSSES))
@pytest.mark.parametrize("guide_name", sorted(GUIDES))
def test_step_gradients_and_predictive_shapes(guide_name, loss_name):
    n, d, s = 16, 3, 7
    x, y = torch.randn(n, d), torch.randn(n)
    model = MLP(d, hidden=(8, 5), tau="learned")
    guide = GUIDES[guide_name](model)
    svi = SVI(model, guide, pyro.optim.Adam({"lr": 1e-2}), LOSSES[loss_name]())
    loss = svi.step(x, y)
    assert math.isfinite(loss)
    # every parameter of the guide took part in the step and got a finite gradient
    params = dict(guide.named_parameters())
    assert len(params) == 7 + (3 if guide_name == "concrete" else 0)  # 6 weights/biases + tau (+ 3 rates)
    loss_t = LOSSES[loss_name]().differentiable_loss(model, guide, x, y)
    grads = torch.autograd.grad(loss_t, list(params.values()), allow_unused=False)
    for (name, _), grad in zip(params.items(), grads, strict=True):
        assert torch.isfinite(grad).all(), name
        assert grad.abs().sum() > 0, name

    x_test = torch.randn(11, d)
    out = Predictive(model, guide=guide, num_samples=s, parallel=True)(x_test)
    assert out["obs"].shape == (s, 11)
    assert out["mean"].shape == (s, 11)
    assert out["hidden.0.weight"].shape == (
        s,
        1,
        8,
        d,
    )  # Predictive keeps the plate slot on latents
    assert out["tau"].shape == (s, 1)
    # draws differ from one another (masks are resampled per draw) ...
    assert out["mean"].std(0).max() > 0
    # ... and match sequential prediction in shape
    seq = Predictive(model, guide=guide, num_samples=3)(x_test)
    assert seq["obs"].shape == (3, 11)
