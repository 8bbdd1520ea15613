"""Per-example dropout masks: one mask per data point, an unbiased estimator of the same ELBO."""

import math

import pyro
import pyro.distributions as dist
import pytest
import torch
from torch.distributions import kl_divergence

from pyro_dropout import BBAlpha, DropoutELBO, DropoutGuide, QuantisedGaussian
from pyro_dropout.infer import CompiledSVI
from pyro_dropout.infer.elbo import log_likelihood_sum
from pyro_dropout.infer.loss_terms import importance_trace
from pyro_dropout.nn import MLP
from pyro_dropout.nn.functional import conv2d, linear

from .models import data, raw_regression

N, D, TAU, P = 8, 3, 4.0, 0.3


def _linear_model(x, y=None):
    w = pyro.sample("w", QuantisedGaussian(x.new_zeros(()), x.new_ones(())).expand([1, D]).to_event(2))
    with pyro.plate("data", x.shape[-2]):
        return pyro.sample("obs", dist.Normal(linear(x, w).squeeze(-1), TAU**-0.5), obs=y)


def _linear_setup():
    """Seeded float64 data for the linear model, its guide and the guide's mean M; and the
    generator, for further draws."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(N, D, generator=g, dtype=torch.float64)
    y = torch.randn(N, generator=g, dtype=torch.float64)
    guide = DropoutGuide(_linear_model, dropout=P)
    with torch.random.fork_rng():  # the same means M at every call (each a new guide)
        torch.manual_seed(1)
        guide(x, y)
    return x, y, guide, guide.median()["w"][0], g


def _draws(per_example, draws=20_000):
    """Per-point log-likelihoods ``[draws, N]`` of the linear model, and the model's mean M."""
    x, y, guide, m, _ = _linear_setup()

    def under_plate(fn):
        def run(*args):
            with pyro.plate("draws", draws, dim=-2):
                return fn(*args)

        return run

    model_trace, _ = importance_trace(
        under_plate(_linear_model), under_plate(guide), (x, y), {}, 2, True, per_example
    )
    return model_trace.nodes["obs"]["log_prob"], x, y, m


def _expected_log_likelihood(x, y, m):
    """E_q log N(y_n | x_n W', 1/tau) in closed form: the mean error plus the mask variance."""
    mean_sq = (y - x @ m) ** 2 + (x**2 @ m**2) * P / (1 - P)
    return -0.5 * TAU * mean_sq + 0.5 * torch.log(torch.tensor(TAU / (2 * torch.pi), dtype=x.dtype))


@pytest.mark.parametrize("per_example", [False, True])
def test_each_points_term_is_unbiased(per_example):
    log_p, x, y, m = _draws(per_example)
    exact = _expected_log_likelihood(x, y, m)
    se = log_p.std(0) / log_p.shape[0] ** 0.5
    # 4 standard errors per point (20,000 draws)
    assert ((log_p.mean(0) - exact).abs() < 4 * se).all(), (log_p.mean(0), exact, se)


def test_per_example_terms_are_independent_and_the_sum_has_lower_variance():
    shared, *_ = _draws(False)
    own, *_ = _draws(True)

    def mean_offdiagonal_correlation(log_p):  # of its size: a shared mask moves a pair either way
        c = torch.corrcoef(log_p.T).abs()
        return (c.sum() - c.diagonal().sum()) / (N * (N - 1))

    # one mask per draw couples the points; one per point does not (each |r| has a standard
    # error of 1/sqrt(20,000) = 0.007 when independent: a mean of 0.03 is four of them)
    assert mean_offdiagonal_correlation(shared) > 0.1
    assert mean_offdiagonal_correlation(own) < 0.03
    assert own.sum(-1).var() < shared.sum(-1).var()


def _row_outputs(per_example, model_fn, x):
    guide = DropoutGuide(model_fn, dropout=0.5)
    guide(x)
    model_trace, _ = importance_trace(model_fn, guide, (x,), {}, 1, True, per_example)
    return model_trace.nodes["f"]["value"]


def _ones_model(x, y=None):
    w = pyro.sample("w", QuantisedGaussian(x.new_zeros(()), x.new_ones(())).expand([1, 16]).to_event(2))
    pyro.deterministic("f", linear(x, w))


def test_rows_get_their_own_masks_only_when_asked():
    x = torch.ones(64, 16)
    shared = _row_outputs(False, _ones_model, x)
    own = _row_outputs(True, _ones_model, x)
    assert torch.all(shared == shared[0])  # identical rows, one mask: identical outputs
    assert own.unique().numel() > 10  # identical rows, a mask each: different outputs


def _conv_model(x, y=None):
    w = pyro.sample("w", QuantisedGaussian(x.new_zeros(()), x.new_ones(())).expand([2, 8, 1, 1]).to_event(4))
    pyro.deterministic("f", conv2d(x, w))


def test_conv2d_masks_whole_channels_of_each_image():
    x = torch.ones(32, 8, 5, 5)
    own = _row_outputs(True, _conv_model, x)
    assert own.shape == (32, 2, 5, 5)
    per_image = own.flatten(-2)
    assert torch.all(per_image == per_image[..., :1])  # one mask per channel, over all pixels
    assert per_image[:, 0, 0].unique().numel() > 5  # and a different one per image


def test_weight_used_outside_the_library_layers_is_named():
    def raw(x, y=None):
        w = pyro.sample(
            "w_raw", QuantisedGaussian(x.new_zeros(()), x.new_ones(())).expand([1, D]).to_event(2)
        )
        with pyro.plate("data", x.shape[-2]):
            pyro.sample("obs", dist.Normal((x @ w.transpose(-1, -2)).squeeze(-1), 1.0), obs=y)

    x, y = torch.randn(N, D), torch.randn(N)
    guide = DropoutGuide(raw, dropout=P)
    with pytest.raises(ValueError, match=r"w_raw.*linear or conv2d"):
        DropoutELBO(per_example_masks=True).loss(raw, guide, x, y)
    assert torch.isfinite(torch.tensor(DropoutELBO().loss(raw, guide, x, y)))  # per draw: fine


def test_weight_used_twice_is_refused():
    def tied(x, y=None):
        w = pyro.sample("w", QuantisedGaussian(x.new_zeros(()), x.new_ones(())).expand([D, D]).to_event(2))
        h = linear(linear(x, w), w)
        with pyro.plate("data", x.shape[-2]):
            pyro.sample("obs", dist.Normal(h.sum(-1), 1.0), obs=y)

    x, y = torch.randn(N, D), torch.randn(N)
    with pytest.raises(ValueError, match=r"'w'.*once"):
        DropoutELBO(per_example_masks=True).loss(tied, DropoutGuide(tied, dropout=P), x, y)


def test_bbalpha_with_one_particle_is_the_elbo_under_per_example_masks():
    x, y = data()
    guide = DropoutGuide(raw_regression, dropout=0.3)
    guide(x, y)
    pyro.set_rng_seed(3)
    elbo = DropoutELBO(per_example_masks=True).loss(raw_regression, guide, x, y)
    pyro.set_rng_seed(3)
    bb = BBAlpha(0.5, num_particles=1, per_example_masks=True).loss(raw_regression, guide, x, y)
    assert bb == pytest.approx(elbo, rel=1e-12)


def test_runs_particles_and_compiled_svi_keep_each_runs_rate():
    """Run 0 has p = 0: its outputs must not depend on the masks; run 1 (p = 0.5) must."""
    model = MLP(4, hidden=(16,), tau=torch.ones(2), runs=2)
    p = torch.tensor([[0.0], [0.5]])
    guide = DropoutGuide(model, dropout=p)
    x, y = torch.randn(2, 10, 4), torch.randn(2, 10)
    svi = CompiledSVI(
        model, guide, pyro.optim.Adam({"lr": 1e-3}), DropoutELBO(num_particles=3, per_example_masks=True)
    )
    assert torch.isfinite(torch.tensor(svi.step(x, y)))

    def mean_site(particles):
        loss = DropoutELBO(num_particles=particles, per_example_masks=True)
        loss._guess_max_plate_nesting(model, guide, (x, y), {})
        traces = loss._get_vectorized_trace(model, guide, (x, y), {})
        return traces[0].nodes["mean"]["value"]

    f = mean_site(3)
    assert f.shape == (3, 2, 10)
    assert torch.allclose(f[:, 0], f[0, 0].expand(3, 10))  # p = 0: no noise
    assert not torch.allclose(f[:, 1], f[0, 1].expand(3, 10))  # p = 0.5: noise


def test_concrete_rates_get_gradients_through_the_input_masks():
    """The likelihood alone (no KL) reaches the learned rates only through the input masks."""
    x, y = data()
    guide = DropoutGuide(raw_regression, concrete=True)
    model_trace, _ = importance_trace(raw_regression, guide, (x, y), {}, 1, True, per_example=True)
    log_likelihood_sum(model_trace).backward()
    grads = {n: p.grad for n, p in guide.named_parameters() if n.startswith("rates")}
    assert set(grads) == {"rates.w1_unconstrained", "rates.w2_unconstrained"}
    assert all(g is not None and float(g.abs().sum()) > 0 for g in grads.values())


@pytest.mark.slow
def test_bbalpha_per_example_masks_estimate_the_per_point_expectation():
    """E[loss] = KL - (1/alpha) sum_n E log (1/K) sum_k p(y_n | x_n, W_kn)^alpha, every (k, n) its
    own mask: checked against an independent Monte Carlo estimate in raw PyTorch (seeded, 4
    standard errors), which also shows that masks shared by the particles would fail it."""
    alpha, k, draws = 0.5, 4, 3000
    x, y, guide, m, g = _linear_setup()
    kl = kl_divergence(guide.family("w"), guide.prototype_trace.nodes["w"]["fn"]).item()
    loss = BBAlpha(alpha, num_particles=k, per_example_masks=True)
    pyro.set_rng_seed(0)
    library = torch.tensor([loss.loss(_linear_model, guide, x, y) for _ in range(draws)]) - kl

    keep = (torch.rand(20 * draws, k, N, D, generator=g, dtype=torch.float64) > P) / (1 - P)
    log_p = dist.Normal((x * keep) @ m, TAU**-0.5).log_prob(y)  # [draws, K, N]
    raw = -((torch.logsumexp(alpha * log_p, 1) - math.log(k)) / alpha).sum(-1)
    se = (library.var() / draws + raw.var() / raw.numel()).sqrt()
    assert abs(library.mean() - raw.mean()) < 4 * se, (library.mean(), raw.mean(), se)
    # one mask shared by the K particles would give the ELBO's term, E log p(y_n | ...), instead
    shared = -_expected_log_likelihood(x, y, m).sum()
    assert abs(shared - raw.mean()) > 10 * se
