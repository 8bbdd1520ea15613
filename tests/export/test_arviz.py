import math
import warnings

import numpy as np
import pyro
import pytest
import torch
from pyro.infer import MCMC, NUTS, SVI

from pyro_dropout import DropoutELBO, DropoutGuide, to_arviz
from pyro_dropout.export import from_samples, mcmc_to_arviz
from pyro_dropout.nn import MLP

az = pytest.importorskip("arviz")


def _data():
    g = torch.Generator().manual_seed(0)
    x = torch.linspace(-2, 2, 30).unsqueeze(-1)
    return x, torch.sin(2 * x).squeeze(-1) + 0.2 * torch.randn(30, generator=g)


def _dropout_fit(x, y):
    model = MLP(1, hidden=(50,), tau=25.0)
    guide = DropoutGuide(model, dropout=0.05)
    svi = SVI(model, guide, pyro.optim.Adam({"lr": 1e-2}), DropoutELBO(num_particles=4))
    for _ in range(1500):
        svi.step(x, y)
    return model, guide


def test_to_arviz_groups_summary_and_loo():
    x, y = _data()
    model, guide = _dropout_fit(x, y)
    idata = to_arviz(model, guide, x, y, num_samples=300, posterior=["output.bias", "mean"])
    for group in ("posterior", "posterior_predictive", "log_likelihood", "observed_data"):
        assert group in idata.groups()
    assert idata.posterior_predictive["obs"].shape == (1, 300, 30)  # one chain
    assert idata.log_likelihood["obs"].shape == (1, 300, 30)
    np.testing.assert_allclose(idata.observed_data["obs"].values, y.numpy())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        summary = az.summary(idata, var_names=["output.bias"])
        loo = az.loo(idata)
    assert "output.bias[0]" in summary.index
    assert math.isfinite(loo.elpd_loo)


def test_from_samples_splits_chains_and_rejects_bad_input():
    idata = from_samples(posterior={"w": torch.randn(40, 3)}, chains=4)
    assert idata.posterior["w"].shape == (4, 10, 3)
    with pytest.raises(ValueError, match="chains"):
        from_samples(posterior={"w": torch.randn(10, 3)}, chains=3)
    with pytest.raises(ValueError, match="nothing to export"):
        from_samples()


def test_to_arviz_needs_observations():
    x, _ = _data()
    model = MLP(1, hidden=(4,))
    with pytest.raises(ValueError, match="observed no data"):
        to_arviz(model, DropoutGuide(model), x, num_samples=5)


@pytest.mark.slow
def test_compare_mc_dropout_against_nuts_on_the_same_model():
    x, y = _data()
    model, guide = _dropout_fit(x, y)
    dropout = to_arviz(model, guide, x, y, num_samples=400)
    pyro.set_rng_seed(0)
    kernel = NUTS(model, jit_compile=True, max_tree_depth=5, ignore_jit_warnings=True)
    mcmc = MCMC(kernel, num_samples=150, warmup_steps=150, disable_progbar=True)
    mcmc.run(x, y)
    hmc = mcmc_to_arviz(model, mcmc, x, y, posterior=["output.bias"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = az.compare({"mc_dropout": dropout, "hmc": hmc})
    assert set(table.index) == {"mc_dropout", "hmc"}
    assert np.isfinite(table["elpd_loo"]).all()


def test_loo_stays_finite_when_a_points_draws_span_hundreds_of_nats():
    """A dropout draw that misses a point by far gives it a log-likelihood hundreds of nats below
    the others; in float32 ArviZ's PSIS overflows (exp of more than about 88) and loo is NaN."""
    az = pytest.importorskip("arviz")
    g = np.random.default_rng(0)
    ll = g.normal(1.0, 0.5, (500, 20)).astype(np.float32)
    ll[:5, 0] = -300.0
    idata = from_samples(posterior={"a": g.normal(size=500)}, log_likelihood={"obs": torch.from_numpy(ll)})
    assert idata.log_likelihood["obs"].dtype == np.float64
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the Pareto k of point 0 is high: that is the point
        assert math.isfinite(az.loo(idata).elpd_loo)
