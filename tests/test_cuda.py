"""The GPU path: everything follows the model's device. Runs only where CUDA is available."""

import pyro
import pytest
import torch
from pyro.infer import SVI, Predictive

from pyro_dropout import BBAlpha, DropoutELBO, DropoutGuide
from pyro_dropout.nn import MLP

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.mark.parametrize("concrete", [False, True])
@pytest.mark.parametrize(
    "loss",
    [
        DropoutELBO(num_particles=2),
        BBAlpha(0.5, num_particles=4),
        DropoutELBO(num_particles=2, per_example_masks=True),
        BBAlpha(0.5, num_particles=4, per_example_masks=True),
    ],
)
def test_training_and_prediction_stay_on_the_gpu(concrete, loss):
    device = torch.device("cuda")
    x, y = torch.randn(32, 3, device=device), torch.randn(32, device=device)
    model = MLP(3, hidden=(16,), tau="learned").to(device)
    guide = DropoutGuide(model, concrete=True) if concrete else DropoutGuide(model, dropout=0.1)
    svi = SVI(model, guide, pyro.optim.Adam({"lr": 1e-2}), loss)
    for _ in range(3):
        assert torch.isfinite(torch.tensor(svi.step(x, y)))
    assert all(p.device.type == "cuda" for p in guide.parameters())
    out = Predictive(model, guide=guide, num_samples=5, parallel=True)(x)
    assert out["obs"].device.type == "cuda" and out["obs"].shape == (5, 32)
