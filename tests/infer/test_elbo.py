import math

import pyro
import pyro.distributions as dist
import pytest
import torch
from pyro.infer import SVI

from pyro_dropout import BernoulliDropout, DropoutELBO, DropoutGuide, QuantisedGaussian
from pyro_dropout.distributions import kl as kl_module
from pyro_dropout.nn.functional import linear

from .models import data, raw_regression


def _kl_formula(m, p, s):
    h = -p * math.log(p) - (1 - p) * math.log(1 - p) if p > 0 else 0.0
    return (
        m.pow(2).sum() / (2 * s**2 * (1 - p))
        - m.shape[-1] * h
        + m.numel() * (math.log(s) + 0.5 * math.log(2 * math.pi))
    ).item()


@pytest.fixture
def spy(monkeypatch):
    calls = []
    original = kl_module.kl_masked_gaussian

    def counting(q, *args):
        calls.append(type(q).__name__)
        return original(q, *args)

    monkeypatch.setattr(kl_module, "kl_masked_gaussian", counting)
    return calls


@pytest.mark.parametrize("num_particles", [1, 4])
def test_analytic_kl_is_taken_inside_plates_and_to_event(spy, num_particles):
    """A prior-only model: the loss is exactly the analytic KL, and the registered KL ran."""

    def model():
        with pyro.plate("heads", 3):
            pyro.sample("w", QuantisedGaussian(0.0, 2.0).expand([4, 5]).to_event(2))

    guide = DropoutGuide(model, dropout=0.3)
    loss = DropoutELBO(num_particles=num_particles).loss(model, guide)
    m = guide.median()["w"]
    expected = sum(_kl_formula(m[i], 0.3, 2.0) for i in range(3))
    assert loss == pytest.approx(expected, rel=1e-5)
    assert spy and set(spy) == {"BernoulliDropout"}


def test_loss_is_minus_log_likelihood_plus_kl_with_minibatch_scaling():
    x, y = data()
    scale = 10.0  # a minibatch of 12 standing for 120 points

    def model(x, y=None):
        return raw_regression(x, y, scale=scale)

    # p = 0 everywhere: the loss is deterministic and can be written out
    guide = DropoutGuide(model, dropout=0.0)
    loss = DropoutELBO().loss(model, guide, x, y)
    m = guide.median()
    mu = linear(torch.relu(linear(x, m["w1"], m["b1"])), m["w2"]).squeeze(-1)
    log_lik = dist.Normal(mu, 0.5).log_prob(y).sum() * scale
    kl = sum(_kl_formula(m[k], 0.0, 1.0) for k in ("w1", "b1", "w2"))
    assert loss == pytest.approx((-log_lik).item() + kl, rel=1e-10)


def test_dropout_site_without_analytic_kl_is_an_error_not_a_monte_carlo_fallback():
    def model():
        pyro.sample("w", dist.Laplace(0.0, 1.0).expand([2, 3]).to_event(2))

    def guide():
        pyro.sample("w", BernoulliDropout(pyro.param("m", torch.randn(2, 3)), 0.1))

    with pytest.raises(ValueError, match="site 'w': no analytic KL between the dropout family"):
        DropoutELBO().loss(model, guide)


def test_point_estimates_contribute_their_log_prior():
    def model():
        pyro.sample("tau", dist.Gamma(2.0, 1.0))

    guide = DropoutGuide(model)
    loss = DropoutELBO().loss(model, guide)
    tau = guide.median()["tau"]
    assert loss == pytest.approx(-dist.Gamma(2.0, 1.0).log_prob(tau).item(), rel=1e-6)


@pytest.mark.parametrize("where", ["x", "y"])
def test_nan_or_inf_in_the_data_is_rejected(where):
    x, y = data()
    guide = DropoutGuide(raw_regression)
    guide(x, y)
    if where == "x":
        x = x.clone()
        x[3, 1] = float("nan")
        match = "model argument 0"
    else:
        y = y.clone()
        y[0] = float("inf")
        match = "model argument 1"
    with pytest.raises(ValueError, match=match):
        DropoutELBO().loss(raw_regression, guide, x, y)


def test_observed_nan_passed_as_a_closure_is_rejected():
    x, y = data()
    y = y.clone()
    y[2] = float("nan")

    def model(x):
        return raw_regression(x, y)

    with pytest.raises(ValueError, match="observed data at site 'obs'"):
        DropoutELBO().loss(model, DropoutGuide(model), x)


def test_broadcasting_trap_is_detected_and_the_particles_run_one_at_a_time():
    """x @ W.T keeps the plate slot: the likelihood would silently become [K, K, N]. The batching
    self-check sees it, warns, and loops over the particles: the loss of vectorize_particles=False
    from the same random state."""
    x, y = data()

    def model(x, y=None):
        prior = QuantisedGaussian(x.new_zeros(()), x.new_ones(()))
        w = pyro.sample("w", prior.expand([1, 2]).to_event(2))
        mu = (x @ w.transpose(-1, -2)).squeeze(-1)
        with pyro.plate("data", x.shape[-2]):
            pyro.sample("obs", dist.Normal(mu, 1.0), obs=y)

    guide = DropoutGuide(model)
    guide(x, y)
    pyro.set_rng_seed(4)
    with pytest.warns(
        UserWarning, match=r"vectorised particles do not match one particle at a time at site obs"
    ):
        checked = DropoutELBO(num_particles=5).loss(model, guide, x, y)
    pyro.set_rng_seed(4)
    assert checked == DropoutELBO(num_particles=5, vectorize_particles=False).loss(model, guide, x, y)


def test_svi_step_decreases_the_loss():
    x, y = data(n=40)
    guide = DropoutGuide(raw_regression, dropout=0.1)
    svi = SVI(raw_regression, guide, pyro.optim.Adam({"lr": 0.02}), DropoutELBO(num_particles=8))
    first = sum(svi.step(x, y) for _ in range(20)) / 20
    for _ in range(400):
        svi.step(x, y)
    last = sum(svi.step(x, y) for _ in range(20)) / 20
    assert last < first - 10


def test_finite_check_edge_cases():
    from pyro_dropout.infer.input_checks import has_non_finite

    # huge but finite values whose float64 sum overflows are still finite
    assert not has_non_finite(torch.full((4,), 1e308, dtype=torch.float64))
    assert not has_non_finite(torch.full((3,), 3e38))
    # NaN, one inf, and infs of both signs (their sum is NaN) are caught
    assert has_non_finite(torch.tensor([1.0, float("nan")]))
    assert has_non_finite(torch.tensor([1.0, float("inf")]))
    assert has_non_finite(torch.tensor([float("inf"), -float("inf")]))
    assert not has_non_finite(torch.tensor([1, 2]))  # integer tensors hold no NaN
