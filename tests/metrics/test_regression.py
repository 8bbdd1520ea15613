import math

import pytest
import torch
from torch.distributions import Normal

from pyro_dropout.metrics import (
    coverage,
    crps,
    gaussian_log_likelihood,
    miscalibration_area,
    pit,
    rmse,
)

D = torch.float64


def test_eq13_against_a_direct_computation():
    g = torch.Generator().manual_seed(0)
    draws, y, tau = (
        torch.randn(7, 5, generator=g, dtype=D),
        torch.randn(5, generator=g, dtype=D),
        3.0,
    )
    direct = torch.tensor(
        [
            math.log(
                sum(math.exp(Normal(draws[t, n], tau**-0.5).log_prob(y[n]).item()) for t in range(7)) / 7
            )
            for n in range(5)
        ],
        dtype=D,
    )
    assert torch.allclose(gaussian_log_likelihood(draws, y, tau), direct)
    # a precision per draw: the exact mixture density
    taus = torch.linspace(1, 4, 7, dtype=D).unsqueeze(-1)
    direct = torch.log(
        torch.stack([Normal(draws[t], taus[t].rsqrt()).log_prob(y).exp() for t in range(7)]).mean(0)
    )
    assert torch.allclose(gaussian_log_likelihood(draws, y, taus), direct)


def test_eq13_with_several_outputs_sums_the_squared_error():
    draws, y = torch.zeros(2, 3, 4, dtype=D), torch.ones(3, 4, dtype=D)
    expected = -0.5 * 2.0 * 4 - 2 * math.log(2 * math.pi) + 2 * math.log(2.0)
    assert torch.allclose(gaussian_log_likelihood(draws, y, 2.0), torch.full((3,), expected, dtype=D))


def _calibrated(n=20000, t=50, seed=0, spread=0.7, noise=0.5):
    """y drawn from exactly the mixture the draws describe."""
    g = torch.Generator().manual_seed(seed)
    means = spread * torch.randn(t, n, generator=g, dtype=D)
    pick = torch.randint(0, t, (n,), generator=g)
    y = means[pick, torch.arange(n)] + noise * torch.randn(n, generator=g, dtype=D)
    return means, y, torch.tensor(noise**2, dtype=D)


def test_coverage_and_pit_on_an_exactly_calibrated_mixture():
    means, y, var = _calibrated()
    levels = (0.5, 0.8, 0.9, 0.95)
    cov = coverage(means, y, var, levels)
    for level in levels:
        se = math.sqrt(level * (1 - level) / y.numel())
        assert abs(cov[level] - level) < 4 * se, (level, cov[level])
    # PIT values of a calibrated predictive are uniform: mean 1/2, variance 1/12
    u = pit(means, y, var)
    assert abs(u.mean().item() - 0.5) < 0.01 and abs(u.var().item() - 1 / 12) < 0.003
    assert miscalibration_area(means, y, var) < 0.01


def test_overconfident_predictive_undercovers():
    means, y, var = _calibrated()
    cov = coverage(means, y, var / 16)
    assert all(cov[level] < level - 0.05 for level in cov)
    assert miscalibration_area(means, y, var / 16) > 0.05


def test_miscalibration_area_against_numerical_integration():
    means, y, var = _calibrated(n=300, seed=3, noise=0.3)
    u = pit(means, y, var)
    d = 2 * (u - 0.5).abs()
    grid = torch.linspace(0, 1, 200001, dtype=D)
    observed = torch.searchsorted(d.sort().values, grid, right=True).double() / len(d)  # share of d <= grid
    numeric = torch.trapezoid((observed - grid).abs(), grid).item()
    assert miscalibration_area(means, y, var * 2) != pytest.approx(
        numeric, abs=1e-3
    )  # a different predictive
    assert miscalibration_area(means, y, var) == pytest.approx(numeric, abs=1e-4)


def test_crps_of_a_single_gaussian_is_the_closed_form():
    mu, sigma, y = 0.3, 1.7, torch.tensor([-1.0, 0.3, 2.5], dtype=D)
    z = (y - mu) / sigma
    phi, Phi = (
        torch.exp(-0.5 * z**2) / math.sqrt(2 * math.pi),
        0.5 * (1 + torch.erf(z / math.sqrt(2))),
    )
    closed = sigma * (z * (2 * Phi - 1) + 2 * phi - 1 / math.sqrt(math.pi))
    assert torch.allclose(crps(torch.full((1, 3), mu, dtype=D), y, sigma**2), closed)


def test_crps_of_a_mixture_against_monte_carlo_and_pair_sampling():
    g = torch.Generator().manual_seed(0)
    means, var = torch.randn(300, 4, generator=g, dtype=D), torch.tensor(0.25, dtype=D)
    y = torch.tensor([0.0, 1.0, -2.0, 3.0], dtype=D)
    exact = crps(means, y, var, max_exact_draws=1000)
    sampled = crps(means, y, var, max_exact_draws=10, num_pairs=20000)
    # se of the sampled pair term: sd of |X - X'| terms (about 0.9 here) / sqrt(20000) / 2 ~ 0.003
    assert torch.allclose(sampled, exact, atol=0.012)
    # exact in chunks of points equals exact in one go
    assert torch.allclose(crps(means, y, var, max_exact_draws=300), exact)
    # Monte Carlo from the definition E|X - y| - E|X - X'|/2
    n = 400000
    pick = torch.randint(0, 300, (2, n), generator=g)
    cols = torch.arange(4)
    x1 = means[pick[0]][:, cols] + 0.5 * torch.randn(n, 4, generator=g, dtype=D)
    x2 = means[pick[1]][:, cols] + 0.5 * torch.randn(n, 4, generator=g, dtype=D)
    mc = (x1 - y).abs().mean(0) - 0.5 * (x1 - x2).abs().mean(0)
    assert torch.allclose(mc, exact, atol=0.01)


def test_rmse():
    assert rmse(torch.tensor([1.0, 3.0]), torch.tensor([0.0, 0.0])) == pytest.approx(math.sqrt(5))


def test_bad_regression_inputs():
    draws, y = torch.zeros(4, 5), torch.zeros(5)
    with pytest.raises(ValueError, match="shape"):
        coverage(draws, torch.zeros(6), 1.0)
    with pytest.raises(ValueError, match="NaN"):
        gaussian_log_likelihood(draws, torch.full((5,), float("nan")), 1.0)
    with pytest.raises(ValueError, match="tau must be positive"):
        gaussian_log_likelihood(draws, y, 0.0)
    with pytest.raises(ValueError, match="draws"):
        crps(torch.zeros(5), y, 1.0)
    with pytest.raises(ValueError, match="levels"):
        coverage(draws, y, 1.0, levels=(1.5,))
