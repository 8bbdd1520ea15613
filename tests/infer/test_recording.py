"""The clean-up of a recorded loss (pyro_dropout/infer/fast/recording.py): what it removes, what it
keeps, and that the cleaned trace gives the recorded value and gradient (tolerance 1e-6)."""

import pytest
import torch

from pyro_dropout import DropoutELBO
from pyro_dropout.infer.fast.recording import trace_loss

from .models import graph_kinds as _kinds
from .models import only_trace, small_mlp_svi

RATIO = 0.25


def _check_same(fn, traced, w):
    eager = fn(w)
    (grad,) = torch.autograd.grad(eager, w)
    value = traced(w)
    (traced_grad,) = torch.autograd.grad(value, w)
    assert value.item() == pytest.approx(eager.item(), rel=1e-6)
    assert torch.allclose(traced_grad, grad, rtol=1e-6, atol=1e-6)


def test_a_zero_mean_and_the_kls_squares_fold_to_one_scaled_square():
    zero = torch.zeros(1, 1)

    def kl_like(w):
        centred = w - zero  # a prior's zero mean
        return torch.addcmul(centred * centred, w, w, value=RATIO).sum()

    w = torch.randn(5, 3, requires_grad=True)
    traced = trace_loss(kl_like, (w,))
    kinds = _kinds(traced)
    assert "aten::sub" not in kinds and "aten::addcmul" not in kinds
    _check_same(kl_like, traced, w)


def test_multiplying_by_one_and_adding_zero_are_dropped_but_a_scaled_addition_is_kept():
    one, zero = torch.ones(()), torch.zeros(1, 1)

    def fn(w):
        kept = torch.add(zero, w, alpha=2.0)  # 0 + 2 w: not w
        return ((w * one) / one + zero).sum() + (one * w).sum() + kept.sum()

    w = torch.randn(5, 3, requires_grad=True)
    traced = trace_loss(fn, (w,))
    kinds = _kinds(traced)
    assert "aten::mul" not in kinds and "aten::div" not in kinds and kinds.count("aten::add") == 3
    _check_same(fn, traced, w)


@pytest.mark.parametrize(
    "case",
    ["nonzero mean", "widening zero", "two tensors"],
)
def test_what_is_not_a_zero_mean_or_one_square_is_kept(case):
    mean = torch.full((1, 1), 0.5) if case == "nonzero mean" else torch.zeros(2, 5, 3)
    other = torch.randn(5, 3)

    def fn(w):
        centred = w - mean
        second = other if case == "two tensors" else centred
        return torch.addcmul(centred * centred, centred, second, value=RATIO).sum()

    w = torch.randn(5, 3, requires_grad=True)
    traced = trace_loss(fn, (w,))
    kinds = _kinds(traced)
    assert "aten::sub" in kinds if case != "two tensors" else "aten::addcmul" in kinds
    _check_same(fn, traced, w)


def test_the_traced_dropout_elbo_has_neither_and_equals_the_eager_loss():
    x, y = torch.randn(16, 3), torch.randn(16)
    losses = {}
    for jit in (False, True):
        loss = DropoutELBO(jit=jit)
        svi, _, _ = small_mlp_svi(loss)
        losses[jit] = [svi.step(x, y, num_data=100) for _ in range(5)]
        if jit:
            assert "aten::addcmul" not in _kinds(only_trace(loss))
    assert losses[True] == pytest.approx(losses[False], rel=1e-4)
