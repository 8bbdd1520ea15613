"""``FixedNoiseNormal``: ``Normal`` with a float scale, its log-density in fewer operations."""

import pyro.distributions as dist
import pytest
import torch

from pyro_dropout.distributions import FixedNoiseNormal


@pytest.mark.parametrize("scale", [0.01, 1.0, 3.5])
def test_the_log_density_is_normals(scale):
    g = torch.Generator().manual_seed(0)
    loc = torch.randn(4, 7, generator=g, dtype=torch.float64, requires_grad=True)
    y = torch.randn(7, generator=g, dtype=torch.float64)
    mine, theirs = FixedNoiseNormal(loc, scale), dist.Normal(loc, scale)
    assert torch.allclose(mine.log_prob(y), theirs.log_prob(y), rtol=1e-12, atol=1e-12)
    (grad,) = torch.autograd.grad(mine.log_prob(y).sum(), loc)
    (expected,) = torch.autograd.grad(theirs.log_prob(y).sum(), loc)
    assert torch.allclose(grad, expected, rtol=1e-12)
    assert mine.batch_shape == theirs.batch_shape and torch.equal(mine.scale, theirs.scale)


def test_expand_keeps_the_fixed_scale():
    d = FixedNoiseNormal(torch.zeros(3), 2.0).expand([5, 3])
    assert isinstance(d, FixedNoiseNormal) and d.batch_shape == (5, 3) and d.fixed_scale == 2.0
    y = torch.ones(5, 3)
    assert torch.allclose(d.log_prob(y), dist.Normal(torch.zeros(5, 3), 2.0).log_prob(y))
    assert d.sample().shape == (5, 3)


@pytest.mark.parametrize("scale", [0.0, -1.0, float("inf"), float("nan"), True, torch.tensor(1.0)])
def test_a_bad_scale_is_refused(scale):
    with pytest.raises(ValueError, match="FixedNoiseNormal: scale must be a positive finite float"):
        FixedNoiseNormal(torch.zeros(3), scale)
