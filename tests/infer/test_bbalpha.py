import math

import pyro
import pytest
import torch
from pyro import poutine
from torch.distributions import kl_divergence

from pyro_dropout import BBAlpha, DropoutELBO, DropoutGuide
from pyro_dropout.infer import log_mean_exp

from .models import data, raw_regression

K = 8


def _setup(concrete=False, n=12):
    x, y = data(n=n)
    guide = (
        DropoutGuide(raw_regression, dropout=0.5)
        if not concrete
        else DropoutGuide(raw_regression, concrete=True, init_dropout=0.3)
    )
    guide(x, y)
    return x, y, guide


def _loss(loss, x, y, guide, seed):
    pyro.set_rng_seed(seed)
    return loss.differentiable_loss(raw_regression, guide, x, y)


def _per_point_log_lik(x, y, guide, seed, scale=1.0):
    """Independent path: draw K masks exactly as the losses do, then score y by hand."""
    pyro.set_rng_seed(seed)
    with pyro.plate("num_particles_vectorized", K, dim=-2):
        guide_trace = poutine.trace(guide).get_trace(x, y)
        model_trace = poutine.trace(poutine.replay(raw_regression, guide_trace)).get_trace(x, y, scale=scale)
    site = model_trace.nodes["obs"]
    return site["fn"].log_prob(site["value"])  # [K, N]


def test_log_mean_exp_is_precise_and_stable():
    x = torch.tensor([[1e-9, 2e-9, 3e-9]], dtype=torch.float64).T
    assert torch.allclose(log_mean_exp(x), torch.tensor([2e-9], dtype=torch.float64), rtol=1e-9)
    big = torch.tensor([[-1000.0], [0.0]])
    assert torch.allclose(log_mean_exp(big), torch.tensor([-math.log(2)]))
    assert log_mean_exp(torch.full((3, 1), -math.inf)).item() == -math.inf


def test_alpha_to_zero_agrees_with_the_elbo_on_the_same_draws():
    x, y, guide = _setup()
    elbo = DropoutELBO(num_particles=K, max_plate_nesting=1)
    bb = BBAlpha(1e-8, num_particles=K, max_plate_nesting=1)
    for seed in range(3):
        a, b = _loss(elbo, x, y, guide, seed), _loss(bb, x, y, guide, seed)
        assert torch.allclose(a, b, rtol=1e-6), (a, b)


def test_small_alpha_residual_is_half_alpha_times_the_variance():
    x, y, guide = _setup()
    alpha, seed = 1e-3, 5
    elbo = _loss(DropoutELBO(num_particles=K, max_plate_nesting=1), x, y, guide, seed)
    bb = _loss(BBAlpha(alpha, num_particles=K, max_plate_nesting=1), x, y, guide, seed)
    ll = _per_point_log_lik(x, y, guide, seed)
    predicted = -(alpha / 2) * ll.var(0, unbiased=False).sum()
    # third-order terms are O(alpha^2 * E|l - mean|^3): about 1e-3 relative here
    assert torch.allclose(bb - elbo, predicted, rtol=1e-2)


def test_bbalpha_is_the_formula_with_minibatch_scaling_outside_the_log():
    x, y, guide = _setup()
    alpha, seed, scale = 0.5, 7, 25.0

    def model(x, y=None):
        return raw_regression(x, y, scale=scale)

    pyro.set_rng_seed(seed)
    loss = BBAlpha(alpha, num_particles=K, max_plate_nesting=1).differentiable_loss(model, guide, x, y)
    ll = _per_point_log_lik(x, y, guide, seed)
    priors = {name: site["fn"] for name, site in guide.prototype_trace.iter_stochastic_nodes()}
    kl = sum(kl_divergence(guide.family(name), prior).item() for name, prior in priors.items())
    fit = scale * (torch.logsumexp(alpha * ll, 0) - math.log(K)).sum() / alpha
    assert loss.item() == pytest.approx(kl - fit.item(), rel=1e-9)


def test_alpha_one_is_below_the_elbo_loss_on_every_draw():
    x, y, guide = _setup()
    elbo = DropoutELBO(num_particles=K, max_plate_nesting=1)
    bb = BBAlpha(1.0, num_particles=K, max_plate_nesting=1)
    for seed in range(10):
        assert _loss(bb, x, y, guide, seed) <= _loss(elbo, x, y, guide, seed)


def test_one_particle_is_the_elbo_for_any_alpha():
    x, y, guide = _setup()
    for alpha in (0.5, 1.0, 3.0):
        a = _loss(BBAlpha(alpha, num_particles=1), x, y, guide, 3)
        b = _loss(DropoutELBO(num_particles=1), x, y, guide, 3)
        assert torch.allclose(a, b, rtol=1e-12)


@pytest.mark.parametrize("concrete", [False, True])
def test_gradients_match_finite_differences(concrete):
    x, y, guide = _setup(concrete=concrete)
    loss = BBAlpha(0.5, num_particles=4, max_plate_nesting=1)
    params = dict(guide.named_parameters())  # unconstrained: locs.w1_unconstrained, rates.w1_unconstrained
    assert ("rates.w1_unconstrained" in params) == concrete
    with torch.no_grad():  # a random point: zero biases put dropped units on the ReLU kink
        for name, param in params.items():
            if name.startswith("locs"):
                param.normal_(generator=torch.Generator().manual_seed(1))
    seed, h = 11, 1e-6
    grads = torch.autograd.grad(_loss(loss, x, y, guide, seed), list(params.values()))
    for (name, param), grad in zip(params.items(), grads, strict=True):
        for index in [(0,) * param.dim(), tuple(s - 1 for s in param.shape)]:
            with torch.no_grad():
                param[index] += h
            up = _loss(loss, x, y, guide, seed).item()
            with torch.no_grad():
                param[index] -= 2 * h
            down = _loss(loss, x, y, guide, seed).item()
            with torch.no_grad():
                param[index] += h
            fd = (up - down) / (2 * h)
            # central differences in float64: error ~ h^2 f''' + eps/h, far below the tolerance
            assert fd == pytest.approx(grad[index].item(), rel=1e-5, abs=1e-7), (name, index)


def test_sequential_particles_match_the_vectorised_formula():
    x, y, _ = _setup()
    guide = DropoutGuide(raw_regression, dropout=0.0)  # deterministic: both paths see the same draws
    a = _loss(BBAlpha(0.5, num_particles=3, vectorize_particles=False), x, y, guide, 0)
    b = _loss(BBAlpha(0.5, num_particles=3), x, y, guide, 0)
    assert torch.allclose(a, b, rtol=1e-12)


@pytest.mark.parametrize("alpha", [0.0, -1.0, float("nan"), float("inf")])
def test_bad_alpha(alpha):
    with pytest.raises(ValueError, match="alpha"):
        BBAlpha(alpha)


def test_bad_num_particles():
    with pytest.raises(ValueError, match="num_particles"):
        BBAlpha(0.5, num_particles=0)
