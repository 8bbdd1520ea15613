"""The analytic KL of the dropout family against (quantised) Gaussian priors."""

import itertools
import math

import pytest
import torch
from pyro.distributions import Laplace, Normal
from torch.distributions import kl_divergence

from pyro_dropout.distributions import BernoulliDropout, ConcreteDropout, QuantisedGaussian

D = torch.float64


def _entropy(p):
    return -p * math.log(p) - (1 - p) * math.log(1 - p)


def _formula(m, p, s, log_res=0.0):
    """The KL by hand: l^2 |M|^2 / (2 (1-p)) - K H(p) + n (log s + log(2 pi)/2 - log d)."""
    length = 1.0 / s
    n, k = m.numel(), m.shape[-1]
    return (
        length**2 * m.pow(2).sum() / (2 * (1 - p))
        - k * _entropy(p)
        + n * (math.log(s) + 0.5 * math.log(2 * math.pi) - log_res)
    )


def _log_cell_prob(w, s, d):
    """Exact log-probability of the grid cell of w under N(0, s^2) quantised to width d."""
    normal = Normal(torch.tensor(0.0, dtype=D), s)
    return torch.log(normal.cdf(w + d / 2) - normal.cdf(w - d / 2))


def _on_grid(shape, p, d, seed):
    g = torch.Generator().manual_seed(seed)
    grid_values = torch.round(torch.randn(shape, generator=g, dtype=D) / d) * d
    return grid_values * (1 - p)  # kept weights M / (1 - p) lie on the grid


@pytest.mark.parametrize("family", [BernoulliDropout, ConcreteDropout])
@pytest.mark.parametrize("p", [0.1, 0.5])
def test_kl_equals_hand_formula(family, p):
    m = torch.randn(3, 4, dtype=D)
    q = family(m, p)
    for s in (0.5, 2.0):
        prior = QuantisedGaussian(torch.tensor(0.0, dtype=D), s).expand([3, 4]).to_event(2)
        assert torch.allclose(kl_divergence(q, prior), _formula(m, p, s), rtol=1e-12)
        # a continuous Normal prior gives the same value (its infinite constant removed)
        normal = Normal(torch.tensor(0.0, dtype=D), s).expand([3, 4]).to_event(2)
        assert torch.allclose(kl_divergence(q, normal), _formula(m, p, s), rtol=1e-12)


def test_kl_is_exact_against_enumeration_on_a_fine_grid():
    p, s, d = 0.3, 1.5, 1e-3
    m = _on_grid((2, 4), p, d, seed=0)
    q = BernoulliDropout(m, p)
    exact = torch.zeros((), dtype=D)
    for z in itertools.product([0.0, 1.0], repeat=4):
        z = torch.tensor(z, dtype=D)
        log_qz = (z * math.log(1 - p) + (1 - z) * math.log(p)).sum()
        w = m * z / (1 - p)
        exact += log_qz.exp() * (log_qz - _log_cell_prob(w, s, d).sum())
    prior = QuantisedGaussian(torch.tensor(0.0, dtype=D), s, resolution=d).expand([2, 4]).to_event(2)
    analytic = kl_divergence(q, prior)
    # the density approximation of the cell mass is O(d^2): 8 weights x ~1e-7
    assert abs(analytic.item() - exact.item()) < 1e-5
    assert analytic.item() > 0  # a proper KL once the quantisation constant is included


def test_kl_differences_match_monte_carlo_on_a_quantised_grid():
    """KL(q1||p) - KL(q2||p) from the formula against a Monte Carlo estimate (exact cell masses)."""
    s, d, n_draws = 1.0, 1e-3, 40000
    settings = [(_on_grid((3, 5), 0.2, d, seed=1), 0.2), (_on_grid((3, 5), 0.6, d, seed=2), 0.6)]
    prior = QuantisedGaussian(torch.tensor(0.0, dtype=D), s, resolution=d).expand([3, 5]).to_event(2)
    torch.manual_seed(0)
    analytic, mc, se = [], [], []
    for m, p in settings:
        q = BernoulliDropout(m, p)
        analytic.append(kl_divergence(q, prior).item())
        z = (torch.rand(n_draws, 1, 5, dtype=D) > p).to(D)
        log_qz = (z * math.log(1 - p) + (1 - z) * math.log(p)).sum((-1, -2))
        terms = log_qz - _log_cell_prob(m * z / (1 - p), s, d).sum((-1, -2))
        mc.append(terms.mean().item())
        se.append(terms.std().item() / math.sqrt(n_draws))
    diff_se = math.hypot(*se)
    # 4 standard errors of the difference
    assert abs((analytic[0] - analytic[1]) - (mc[0] - mc[1])) < 4 * diff_se
    assert abs(analytic[0] - mc[0]) < 4 * se[0]


def test_point_mass_has_only_the_weight_term():
    m = torch.randn(5, dtype=D)
    q = BernoulliDropout(m, 0.0, event_dim=1)
    prior = QuantisedGaussian(torch.tensor(0.0, dtype=D), 2.0).expand([5]).to_event(1)
    expected = m.pow(2).sum() / 8 + 5 * (math.log(2.0) + 0.5 * math.log(2 * math.pi))
    assert torch.allclose(kl_divergence(q, prior), expected)


def test_nonzero_prior_mean():
    m, mu, p, s = torch.randn(2, 3, dtype=D), 0.7, 0.25, 1.3
    prior = Normal(torch.full((2, 3), mu, dtype=D), s).to_event(2)
    # E(w - mu)^2 = m^2/(1-p) - 2 m mu + mu^2
    second = m.pow(2) / (1 - p) - 2 * m * mu + mu**2
    expected = (second / (2 * s**2)).sum() + 6 * (math.log(s) + 0.5 * math.log(2 * math.pi)) - 3 * _entropy(p)
    assert torch.allclose(kl_divergence(BernoulliDropout(m, p), prior), expected)


def test_batch_plates_and_particles_broadcast():
    m = torch.randn(3, 4, 5, dtype=D)  # a plate of 3 weight matrices
    p = torch.tensor([0.1, 0.2, 0.3], dtype=D)
    q = BernoulliDropout(m, p)
    prior = QuantisedGaussian(torch.tensor(0.0, dtype=D), 1.0).expand([3, 4, 5]).to_event(2)
    kl = kl_divergence(q, prior)
    assert kl.shape == (3,)
    for i in range(3):
        assert torch.allclose(kl[i], _formula(m[i], p[i].item(), 1.0))
    # vectorised particles expand both sides: the KL is the same for every particle
    kl_particles = kl_divergence(q.expand([7, 3]), prior.expand([7, 3]))
    assert kl_particles.shape == (7, 3) and torch.allclose(kl_particles, kl.expand(7, 3))


def test_one_prior_scale_per_batch_element():
    # a prior with one scale per run (batch element), constant over each weight matrix, takes
    # the sum-first path; it must equal the per-run hand formula and the per-weight path
    m = torch.randn(3, 1, 4, 5, dtype=D)
    p = torch.tensor([0.1, 0.2, 0.3], dtype=D).reshape(3, 1)
    s = torch.tensor([0.5, 1.0, 4.0], dtype=D)
    q = BernoulliDropout(m, p)
    prior = QuantisedGaussian(torch.tensor(0.0, dtype=D), s.reshape(3, 1, 1, 1)).expand([3, 1, 4, 5])
    kl = kl_divergence(q, prior.to_event(2))
    assert kl.shape == (3, 1)
    for i in range(3):
        assert torch.allclose(kl[i, 0], _formula(m[i, 0], p[i, 0].item(), s[i].item()), rtol=1e-12)
    # the same scales written out per weight (not constant over the event dims: per-weight path)
    per_weight = s.reshape(3, 1, 1, 1).expand(3, 1, 4, 5).clone()
    per_weight[..., 0, 0] *= 1 + 1e-12
    slow = kl_divergence(q, QuantisedGaussian(torch.tensor(0.0, dtype=D), per_weight).to_event(2))
    assert torch.allclose(slow, kl, rtol=1e-9)


def test_concrete_uses_the_bernoulli_kl_and_has_a_gradient_in_p():
    m = torch.randn(3, 4, dtype=D)
    p = torch.tensor(0.2, dtype=D, requires_grad=True)
    prior = QuantisedGaussian(torch.tensor(0.0, dtype=D), 1.0).expand([3, 4]).to_event(2)
    kl = kl_divergence(ConcreteDropout(m, p), prior)
    assert torch.allclose(kl, _formula(m, 0.2, 1.0))
    kl.backward()
    # d/dp [||M||^2 / (2 (1-p)) - K H(p)] = ||M||^2 / (2 (1-p)^2) - K log((1-p)/p)
    expected = m.pow(2).sum() / (2 * 0.8**2) - 4 * math.log(0.8 / 0.2)
    assert torch.allclose(p.grad, expected)


def test_kl_pushes_learned_rate_below_one_half():
    """With inverted scaling the KL alone is minimised at some p < 0.5, never above it."""
    m = torch.randn(10, 10, dtype=D)
    prior = QuantisedGaussian(torch.tensor(0.0, dtype=D), 1.0).expand([10, 10]).to_event(2)
    ps = torch.linspace(0.01, 0.99, 99, dtype=D)
    kls = torch.stack([kl_divergence(BernoulliDropout(m, p), prior) for p in ps])
    assert ps[kls.argmin()] < 0.5


def test_unsupported_prior_raises_not_implemented():
    q = BernoulliDropout(torch.randn(2, 2), 0.1)
    with pytest.raises(NotImplementedError, match="Laplace"):
        kl_divergence(q, Laplace(0.0, 1.0).expand([2, 2]).to_event(2))
    with pytest.raises(NotImplementedError, match="event dims"):
        kl_divergence(
            BernoulliDropout(torch.randn(2, 2, 2), 0.1, event_dim=2),
            Normal(0.0, 1.0).expand([2, 2, 2]).to_event(3),
        )
