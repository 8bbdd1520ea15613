"""fit_sparse_gp on nearly noise-free data (as naval): no Cholesky failure, an accurate fit."""

import math

import pytest
import torch

from pyro_dropout.baselines import fit_gp, fit_sparse_gp


def test_noise_free_data_with_a_constant_column():
    g = torch.Generator().manual_seed(0)
    x = torch.rand(400, 3, generator=g) * 4 - 2
    x[:, 2] = 0.0  # a constant feature, as the standardisation leaves naval's two constant columns
    f = torch.sin(x[:, 0]) + 0.5 * x[:, 1]  # no noise at all
    y = (f - f.mean()) / f.std()
    gp = fit_sparse_gp(x, y, num_inducing=20, steps=300, seed=0)
    assert float(gp.noise.detach()) >= 1e-6  # the floor holds the noise variance up
    x_new = torch.rand(200, 3, generator=g) * 4 - 2
    x_new[:, 2] = 0.0
    truth = (torch.sin(x_new[:, 0]) + 0.5 * x_new[:, 1] - f.mean()) / f.std()
    with torch.no_grad():
        mu, var = gp(x_new.double(), full_cov=False, noiseless=False)
    rmse = float((mu.float() - truth).pow(2).mean().sqrt())
    # a smooth function of two inputs, 20 inducing points, 300 steps: measured 0.006
    assert rmse < 0.05
    assert bool(torch.isfinite(var).all() and (var > 0).all())


@pytest.mark.parametrize("floor", [0.0, -1.0, math.nan])
def test_noise_floor_must_be_positive(floor):
    with pytest.raises(ValueError, match="noise_floor"):
        fit_sparse_gp(torch.zeros(5, 1), torch.zeros(5), num_inducing=2, steps=1, noise_floor=floor)


@pytest.mark.parametrize("fit", [fit_sparse_gp, fit_gp], ids=["sparse", "exact"])
def test_data_of_the_wrong_shape_is_named(fit):
    """Before, the sparse GP raised a raw IndexError for a 1-d x, and Pyro's message for rows that
    do not match; a column y [n, 1] is named with the fix."""
    x, y = torch.randn(10, 2), torch.randn(10)
    for bad_x, bad_y, match in (
        (x[:, 0], y, r"x must be \[n, d\] and y \[n\], got \(10,\) and \(10,\)"),
        (x, y[:7], r"got \(10, 2\) and \(7,\)"),
        (x, y[:, None], r"pass y.squeeze\(-1\)"),
        (x, y * float("nan"), "must be finite"),
    ):
        with pytest.raises(ValueError, match=match):
            fit(bad_x, bad_y, steps=1)
    with pytest.raises(TypeError, match="must be tensors"):
        fit(x.numpy(), y, steps=1)
