import pytest
import torch
import torch.nn.functional as F

from pyro_dropout.nn.functional import conv2d, linear


def test_linear_drops_the_plate_slot_of_vectorised_weights():
    x = torch.randn(7, 3)
    w = torch.randn(5, 1, 4, 3)  # [S, 1 (data-plate slot), out, in]
    b = torch.randn(5, 1, 4)
    out = linear(x, w, b)
    assert out.shape == (5, 7, 4)  # not [5, 1, 7, 4]
    for s in range(5):
        assert torch.allclose(out[s], F.linear(x, w[s, 0], b[s, 0]), atol=1e-6)


def test_linear_chains_over_sample_dims():
    x = torch.randn(7, 3)
    w1, w2 = torch.randn(5, 1, 4, 3), torch.randn(5, 1, 2, 4)
    h = linear(torch.relu(linear(x, w1)), w2)
    assert h.shape == (5, 7, 2)
    assert torch.allclose(h[2], F.linear(torch.relu(F.linear(x, w1[2, 0])), w2[2, 0]), atol=1e-6)


def test_linear_with_predictive_shapes_and_plain_weights():
    x = torch.randn(7, 3)
    assert linear(x, torch.randn(4, 3)).shape == (7, 4)
    assert linear(x, torch.randn(6, 4, 3), torch.randn(6, 4)).shape == (6, 7, 4)
    assert linear(torch.randn(3), torch.randn(4, 3), torch.randn(4)).shape == (4,)


def test_linear_reports_mismatched_shapes():
    with pytest.raises(ValueError, match="3 features"):
        linear(torch.randn(7, 3), torch.randn(4, 5))
    with pytest.raises(ValueError, match="do not broadcast"):
        linear(torch.randn(2, 7, 3), torch.randn(5, 4, 3))
    with pytest.raises(ValueError, match="bias"):
        linear(torch.randn(7, 3), torch.randn(4, 3), torch.randn(5))


@pytest.mark.parametrize("groups", [1, 2])
def test_conv2d_matches_a_loop_over_draws(groups):
    x = torch.randn(3, 4, 8, 8)
    w = torch.randn(5, 1, 6, 4 // groups, 3, 3)
    b = torch.randn(5, 1, 6)
    out = conv2d(x, w, b, padding=1, groups=groups)
    assert out.shape == (5, 3, 6, 8, 8)
    for s in range(5):
        assert torch.allclose(out[s], F.conv2d(x, w[s, 0], b[s, 0], padding=1, groups=groups), atol=1e-5)
    # batched inputs (a later layer) with batched weights
    out2 = conv2d(torch.randn(5, 3, 4, 8, 8), w, b, padding=1, groups=groups)
    assert out2.shape == (5, 3, 6, 8, 8)


def test_conv2d_reports_channel_mismatch():
    with pytest.raises(ValueError, match="channels"):
        conv2d(torch.randn(2, 3, 5, 5), torch.randn(4, 2, 3, 3))


def test_size_one_plates_are_kept_and_slots_are_dropped():
    import pyro

    x, w = torch.randn(1, 7, 3), torch.randn(5, 1, 1, 4, 3)  # [S, runs=1, slot, out, in]
    with pyro.plate("runs", 1, dim=-2):
        assert linear(x, w).shape == (5, 1, 7, 4)
    assert linear(x, w).shape == (5, 7, 4)  # outside the plate both size-1 dims are slots
    with pyro.plate("data", 7, dim=-1):  # a slot under a size-7 plate is still a slot
        assert linear(x[0], w[:, 0]).shape == (5, 7, 4)
