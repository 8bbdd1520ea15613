import math

import pytest
import torch
from torch.distributions import Normal

from pyro_dropout.distributions import QuantisedGaussian


def test_log_prob_is_gaussian_density_plus_log_resolution():
    x = torch.linspace(-3, 3, 7)
    q = QuantisedGaussian(0.5, 2.0)
    assert torch.allclose(q.log_prob(x), Normal(0.5, 2.0).log_prob(x))
    qr = QuantisedGaussian(0.5, 2.0, resolution=1e-3)
    assert torch.allclose(qr.log_prob(x), Normal(0.5, 2.0).log_prob(x) + math.log(1e-3))


def test_cell_probability_matches_cdf_difference():
    # P(cell) = Phi(w + d/2) - Phi(w - d/2) ~ d * N(w): the documented constant is log d
    d, w = 1e-3, torch.tensor([0.0, 0.7, -1.3], dtype=torch.float64)
    normal = Normal(torch.tensor(0.0, dtype=torch.float64), 1.0)
    exact = torch.log(normal.cdf(w + d / 2) - normal.cdf(w - d / 2))
    q = QuantisedGaussian(torch.tensor(0.0, dtype=torch.float64), 1.0, resolution=d)
    assert torch.allclose(q.log_prob(w), exact, atol=1e-6)


def test_expand_keeps_type_and_parameters():
    q = QuantisedGaussian(0.0, 3.0, resolution=0.01).expand([4, 5])
    assert type(q) is QuantisedGaussian
    assert q.batch_shape == (4, 5) and q.resolution == 0.01
    assert q.sample().shape == (4, 5)
    plated = q.to_event(2).expand([7, 1])
    assert plated.batch_shape == (7, 1) and plated.event_shape == (4, 5)
    assert type(plated.base_dist) is QuantisedGaussian


def test_sample_lies_on_grid_and_has_the_right_spread():
    torch.manual_seed(0)
    q = QuantisedGaussian(torch.zeros(()), torch.tensor(2.0), resolution=0.25)
    s = q.sample((20000,))
    assert torch.allclose(s / 0.25, torch.round(s / 0.25))
    # std of 20000 draws: standard error of the sd ~ 2/sqrt(2*20000) = 0.01; allow 5 se
    assert abs(s.std().item() - 2.0) < 0.05


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan")])
def test_bad_resolution(bad):
    with pytest.raises(ValueError, match="resolution"):
        QuantisedGaussian(0.0, 1.0, resolution=bad)


def test_bad_scale_is_rejected():
    with pytest.raises(ValueError):
        QuantisedGaussian(0.0, -1.0, validate_args=True)
