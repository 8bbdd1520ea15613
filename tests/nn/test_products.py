"""The batched product's transposed layout: same values, contiguous, used only without a gradient."""

import pytest
import torch
import torch.nn.functional as F

from pyro_dropout.nn.functional import linear
from pyro_dropout.nn.products import MAX_SKINNY_OUT, MIN_SKINNY_ROWS, batched_linear, uses_transposed_product


def per_draw(xs: torch.Tensor, ws: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    return torch.stack([F.linear(xs[i], ws[i], None if b is None else b[i]) for i in range(len(ws))])


@pytest.mark.parametrize("d_out", [1, 3, MAX_SKINNY_OUT, MAX_SKINNY_OUT + 1])
@pytest.mark.parametrize("with_bias", [True, False])
def test_both_layouts_give_the_per_draw_product(d_out, with_bias):
    torch.manual_seed(0)
    xs, ws = torch.randn(3, MIN_SKINNY_ROWS, 20), torch.randn(3, d_out, 20)
    b = torch.randn(3, d_out) if with_bias else None
    with torch.no_grad():
        out = batched_linear(xs, ws, b)
    assert out.shape == (3, MIN_SKINNY_ROWS, d_out) and out.is_contiguous()
    assert torch.allclose(out, per_draw(xs, ws, b), atol=1e-5)  # float32 sums of 20 products


def test_the_transposed_layout_only_for_few_outputs_many_rows_and_no_gradient():
    w = torch.randn(2, 1, 5, requires_grad=True)
    n = MIN_SKINNY_ROWS
    assert uses_transposed_product(n, MAX_SKINNY_OUT, w.detach())
    assert not uses_transposed_product(n, MAX_SKINNY_OUT + 1, w.detach())
    assert not uses_transposed_product(n - 1, 1, w.detach())
    assert not uses_transposed_product(n, 1, w)  # a gradient to record
    with torch.no_grad():
        assert uses_transposed_product(n, 1, w)


def test_linear_gives_the_same_values_and_gradients_with_and_without_the_transposed_layout():
    torch.manual_seed(1)
    x = torch.randn(MIN_SKINNY_ROWS, 7)
    w, b = torch.randn(4, 1, 2, 7, requires_grad=True), torch.randn(4, 1, 2, requires_grad=True)
    with torch.no_grad():
        fast = linear(x, w, b)  # transposed
    slow = linear(x, w, b)  # standard, recording the gradient
    assert fast.shape == slow.shape == (4, MIN_SKINNY_ROWS, 2)
    assert torch.allclose(fast, slow, atol=1e-5)
    slow.sum().backward()
    expected = x.sum(0).expand(4, 2, 7)  # d(sum of x @ w.T) / dw
    assert torch.allclose(w.grad[:, 0], expected, atol=1e-3)
    assert torch.allclose(b.grad[:, 0], torch.full((4, 2), float(MIN_SKINNY_ROWS)))
