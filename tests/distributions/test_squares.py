"""The dropout KL's weight term in few passes (pyro_dropout.distributions.squares): the same value
and gradient as the elementwise route (float32 sums in another order: 1e-5 relative), and the
elementwise route wherever the few-pass form does not apply."""

import pytest
import torch

from pyro_dropout.distributions.squares import FEW_PASSES_FROM, weight_squares

SHAPE = torch.Size([300, 256])  # above FEW_PASSES_FROM


def _elementwise(loc, mu, ratio):
    return (loc - mu).pow(2).sum() + ratio * loc.pow(2).sum()


@pytest.mark.parametrize("mu", [0.0, 0.3])
@pytest.mark.parametrize("ratio", [0.05 / 0.95, 0.0, "tensor"])
@pytest.mark.parametrize("lead", [(), (1,), (1, 1)])
def test_the_few_pass_form_is_the_elementwise_one(mu, ratio, lead):
    assert SHAPE.numel() >= FEW_PASSES_FROM
    g = torch.Generator().manual_seed(0)
    loc = torch.randn(*lead, *SHAPE, generator=g).requires_grad_()
    r = torch.tensor(0.25) if ratio == "tensor" else ratio
    mu_t = torch.tensor(mu)
    fast = weight_squares(loc, mu_t, r, SHAPE)
    assert fast is not None and fast.shape == lead
    (fast_grad,) = torch.autograd.grad(fast.sum(), loc)
    slow = _elementwise(loc, mu_t, r)
    (slow_grad,) = torch.autograd.grad(slow, loc)
    assert float(fast.sum()) == pytest.approx(float(slow), rel=1e-5)
    assert torch.allclose(fast_grad, slow_grad, rtol=1e-5, atol=1e-6)


def test_the_elementwise_route_is_kept_where_the_few_pass_form_does_not_apply():
    loc = torch.randn(SHAPE)
    mu = torch.tensor(0.0)
    assert weight_squares(torch.randn(50, 13), mu, 0.1, torch.Size([50, 13])) is None  # small: plain ops
    assert weight_squares(torch.randn(3, *SHAPE), mu, 0.1, SHAPE) is None  # one set of means per run
    assert weight_squares(loc.t(), mu, 0.1, SHAPE[::-1]) is None  # not contiguous
    assert weight_squares(loc, torch.zeros(2, 1, 1), 0.1, SHAPE) is None  # a prior mean per run
    learned = torch.tensor(0.1, requires_grad=True)
    assert weight_squares(loc, mu, learned, SHAPE) is None  # Concrete's learned rate: its gradient too
    assert weight_squares(loc, mu.requires_grad_(), 0.1, SHAPE) is None


def test_its_gradient_cannot_be_differentiated_again():  # an error, not a wrong second derivative
    loc = torch.randn(SHAPE, requires_grad=True)
    out = weight_squares(loc, torch.tensor(0.0), 0.1, SHAPE)
    (grad,) = torch.autograd.grad(out, loc, create_graph=True)
    with pytest.raises(RuntimeError):
        torch.autograd.grad(grad.sum(), loc)
