import pyro
import pyro.distributions as dist
import pytest
import torch
from pyro import poutine

from pyro_dropout import BernoulliDropout, ConcreteDropout, DropoutGuide, QuantisedGaussian
from pyro_dropout.nn import MLP


def _data(n=20, d=3):
    return torch.randn(n, d), torch.randn(n)


def test_sites_get_the_dropout_family_point_masses_and_map_estimates():
    x, y = _data()
    model = MLP(3, hidden=(4,), tau="learned")
    guide = DropoutGuide(model, dropout=0.2)
    tr = poutine.trace(guide).get_trace(x, y)
    assert isinstance(tr.nodes["hidden.0.weight"]["fn"], BernoulliDropout)
    assert tr.nodes["hidden.0.weight"]["fn"].p == 0.2
    bias = tr.nodes["hidden.0.bias"]["fn"]
    assert isinstance(bias, BernoulliDropout) and bias.is_point_mass
    assert isinstance(tr.nodes["tau"]["fn"], dist.Delta)
    assert guide.site_families()["output.weight"] is BernoulliDropout
    assert set(guide.dropout_rates()) == {"hidden.0.weight", "output.weight"}


def test_concrete_learns_one_rate_per_weight_site():
    x, y = _data()
    model = MLP(3, hidden=(4,))
    guide = DropoutGuide(model, concrete=True, init_dropout={"hidden.0.weight": 0.3, "output.weight": 0.0})
    tr = poutine.trace(guide).get_trace(x, y)
    fn = tr.nodes["hidden.0.weight"]["fn"]
    assert isinstance(fn, ConcreteDropout) and fn.temperature == 0.1
    assert fn.p.requires_grad and torch.allclose(fn.p, torch.tensor(0.3))
    # a site given 0 keeps a point mass that is not learned
    assert tr.nodes["output.weight"]["fn"].is_point_mass
    rates = guide.dropout_rates()
    assert torch.allclose(rates["hidden.0.weight"], torch.tensor(0.3)) and rates["output.weight"] == 0


def test_dropout_forms_dict_and_callable():
    x, y = _data()
    model = MLP(3, hidden=(4,))
    g = DropoutGuide(model, dropout={"hidden.0.weight": 0.05, "output.weight": 0.5, "output.bias": 0.1})
    g(x, y)
    rates = g.dropout_rates()
    assert rates["hidden.0.weight"] == pytest.approx(0.05) and rates["output.bias"] == pytest.approx(0.1)
    g2 = DropoutGuide(
        MLP(3, hidden=(4,)), dropout=lambda name, site: 0.3 if name.startswith("hidden") else 0.0
    )
    g2(x, y)
    assert g2.dropout_rates()["hidden.0.weight"] == pytest.approx(0.3)
    assert g2.dropout_rates()["output.weight"] == 0


def test_median_is_the_expected_weight_and_init_is_fan_in():
    x, y = _data()
    model = MLP(3, hidden=(50,), length_scale=1e-2)  # a very broad prior must not set the init
    guide = DropoutGuide(model)
    guide(x, y)
    med = guide.median()
    w = med["hidden.0.weight"]
    assert w.shape == (50, 3) and w.abs().max() <= 1 / 3**0.5
    assert torch.equal(med["hidden.0.bias"], torch.zeros(50))
    # E_q[W] = M: the mean of many draws approaches the median
    draws = torch.stack([guide(x, y)["hidden.0.weight"] for _ in range(4000)])
    assert torch.allclose(draws.mean(0), w, atol=0.05)


def test_raw_site_model_with_weight_in_a_plate():
    def model(x):
        with pyro.plate("heads", 2):
            w = pyro.sample("w", QuantisedGaussian(0.0, 1.0).expand([3, 4]).to_event(2))
        return w

    guide = DropoutGuide(model, dropout=0.5)
    tr = poutine.trace(guide).get_trace(torch.randn(5, 4))
    assert tr.nodes["w"]["fn"].batch_shape == (2,) and tr.nodes["w"]["value"].shape == (2, 3, 4)


# --- bad input ---------------------------------------------------------------------------
@pytest.mark.parametrize("p", [-0.1, 1.0, 2.0])
def test_rate_outside_unit_interval(p):
    with pytest.raises(ValueError, match="dropout probability"):
        DropoutGuide(MLP(2), dropout=p)
    with pytest.raises(ValueError, match="site 'w'"):
        DropoutGuide(MLP(2), dropout={"w": p})
    guide = DropoutGuide(MLP(2), dropout=lambda name, site: p)
    with pytest.raises(ValueError, match=r"hidden\.0\.weight"):
        guide(*_data(d=2))


@pytest.mark.parametrize("t", [0.0, -0.5])
def test_bad_temperature(t):
    with pytest.raises(ValueError, match="temperature"):
        DropoutGuide(MLP(2), concrete=True, temperature=t)


def test_concrete_rejects_fixed_rates():
    with pytest.raises(ValueError, match="init_dropout"):
        DropoutGuide(MLP(2), dropout=0.3, concrete=True)


def test_dict_must_name_every_weight_site_and_only_model_sites():
    x, y = _data(d=2)
    with pytest.raises(ValueError, match=r"no rate for the weight site 'output\.weight'"):
        DropoutGuide(MLP(2, hidden=(3,)), dropout={"hidden.0.weight": 0.1})(x, y)
    spec = {"hidden.0.weight": 0.1, "output.weight": 0.1, "fc9.weight": 0.1}
    with pytest.raises(ValueError, match=r"fc9\.weight"):
        DropoutGuide(MLP(2, hidden=(3,)), dropout=spec)(x, y)


def test_matrix_with_a_prior_without_kl_is_rejected_unless_a_point_estimate():
    def model():
        pyro.sample("w", dist.Laplace(0.0, 1.0).expand([3, 4]).to_event(2))

    with pytest.raises(ValueError, match="site 'w' has a Laplace prior"):
        DropoutGuide(model)()
    guide = DropoutGuide(model, point_estimates=["w"])
    assert isinstance(poutine.trace(guide).get_trace().nodes["w"]["fn"], dist.Delta)


def test_discrete_site_is_rejected():
    def model():
        pyro.sample("k", dist.Categorical(torch.ones(3)))

    with pytest.raises(ValueError, match="site 'k' is discrete"):
        DropoutGuide(model)()


def test_summaries_need_a_setup():
    with pytest.raises(RuntimeError, match="call the guide"):
        DropoutGuide(MLP(2)).dropout_rates()


def test_glorot_init_is_keras_dense():
    from pyro_dropout.guides import init_to_fan_in, init_to_glorot

    x, y = _data(d=8)
    model = MLP(8, hidden=(50,), length_scale=1e-2)
    for init, bounds in (
        (init_to_glorot, {"hidden.0.weight": (6 / 58) ** 0.5, "output.weight": (6 / 51) ** 0.5}),
        (init_to_fan_in, {"hidden.0.weight": 8**-0.5, "output.weight": 50**-0.5}),
    ):
        pyro.clear_param_store()
        guide = DropoutGuide(model, init_loc_fn=init)
        guide(x, y)
        med = guide.median()
        for name, bound in bounds.items():
            w = med[name]  # uniform on (-bound, bound): within it, and spread over it
            assert w.abs().max() <= bound and w.abs().max() > 0.8 * bound
        assert torch.equal(med["hidden.0.bias"], torch.zeros(50))


def test_init_sites_to_starts_the_named_sites_and_the_rest_by_the_fallback():
    from pyro_dropout.guides import init_sites_to, init_to_fan_in
    from pyro_dropout.nn import MLP

    model = MLP(3, hidden=(4,), runs=2, tau="learned")
    guide = DropoutGuide(model, dropout=0.1, init_loc_fn=init_sites_to({"tau": 2.5}))
    x, y = torch.randn(2, 5, 3), torch.randn(2, 5)
    guide(x, y)
    assert torch.allclose(guide.median()["tau"], torch.full((2, 1), 2.5).reshape(guide.median()["tau"].shape))
    weights = guide.median()["hidden.0.weight"]
    assert weights.abs().max() <= 1 / 3**0.5 and weights.std() > 0  # fan-in uniform, as the fallback's
    assert init_sites_to({"tau": 1.0}).keywords["fallback"] is init_to_fan_in
    with pytest.raises(ValueError, match="the start of site 'tau' must be a finite number, got nan"):
        init_sites_to({"tau": float("nan")})


def _median_model():
    """Pyro's autoguide test_median model: a Normal, a LogNormal and a Beta site."""
    pyro.sample("x", dist.Normal(0.0, 2.0))
    pyro.sample("y", dist.LogNormal(0.0, 0.5))
    pyro.sample("z", dist.Beta(2.0, 2.0))


@pytest.mark.parametrize(
    "loss", [pyro.infer.JitTrace_ELBO, pyro.infer.JitTraceGraph_ELBO, pyro.infer.JitTraceEnum_ELBO]
)
def test_pyros_jit_losses_are_refused_by_name(loss):
    """Under Pyro's JIT losses TorchScript froze the guide's transforms (the LogNormal site's
    median came out 0.37, a point mass's answer, instead of 1.0, without an error): refused."""
    guide = DropoutGuide(_median_model)
    svi = pyro.infer.SVI(_median_model, guide, pyro.optim.Adam({"lr": 0.02}), loss())
    with pytest.raises(NotImplementedError, match=r"under a TorchScript trace \(Pyro's JIT losses"):
        svi.step()


def test_the_median_models_sites_fit_under_trace_elbo():
    """The same model under Trace_ELBO: the point estimates reach the sites' modes."""
    pyro.set_rng_seed(0)
    guide = DropoutGuide(_median_model)
    svi = pyro.infer.SVI(_median_model, guide, pyro.optim.Adam({"lr": 0.02}), pyro.infer.Trace_ELBO())
    for _ in range(500):
        svi.step()
    median = guide.median()
    assert abs(float(median["x"])) < 0.05  # the modes: 0, exp(-0.25) = 0.78, 0.5
    assert float(median["y"]) == pytest.approx(0.7788, abs=0.05)
    assert float(median["z"]) == pytest.approx(0.5, abs=0.05)


def test_pyros_autoguide_cases_a_dropout_guide_answers():
    """The cases of Pyro's autoguide suite that failed with DropoutGuide (written here, not copied):
    a guide saved by torch.save and loaded back in the same process runs on (GuideConflictError
    before); a local latent in a plate with subsample_size trains (IndexError: its means indexed
    twice); quantiles answer (AttributeError); a latent on the sphere is refused by name (taken)."""
    import io

    import pyro.distributions.constraints as pyro_constraints
    from pyro.infer import SVI, Trace_ELBO

    def plated():
        pyro.sample("x", dist.Normal(0.0, 1.0))
        with pyro.plate("plate", 2):
            pyro.sample("y", dist.LogNormal(0.0, 1.0))

    guide = DropoutGuide(plated)
    guide()
    pyro.set_rng_seed(0)
    expected = guide()
    saved = io.BytesIO()
    torch.save(guide, saved)
    saved.seek(0)
    loaded = torch.load(saved, weights_only=False)  # a guide of this process: pickles are its own
    pyro.set_rng_seed(0)
    assert all(torch.equal(loaded()[k], v) for k, v in expected.items())

    def subsampled(x, y=None, batch_size=None):
        with pyro.plate("batch", len(x), subsample_size=batch_size):
            sigma = pyro.sample("sigma", dist.LogNormal(0.0, 1.0))
            return pyro.sample("obs", dist.Normal(pyro.subsample(x, event_dim=0), sigma),
                               obs=None if y is None else pyro.subsample(y, event_dim=0))  # fmt: skip

    pyro.clear_param_store()
    x = torch.randn(50)
    svi = SVI(subsampled, DropoutGuide(subsampled), pyro.optim.Adam({"lr": 0.02}), Trace_ELBO())
    for _ in range(5):
        assert torch.isfinite(torch.tensor(svi.step(x, x + 0.1, batch_size=20)))

    pyro.clear_param_store()
    median = DropoutGuide(_median_model)
    median()
    quantiles = median.quantiles([0.1, 0.5, 0.9])
    for name, value in median.median().items():  # point estimates: every quantile the point
        assert quantiles[name].shape == (3, *value.shape) and torch.equal(quantiles[name][1], value)

    def on_the_sphere():
        pyro.sample("y", dist.ProjectedNormal(torch.ones(2)))

    assert isinstance(dist.ProjectedNormal(torch.ones(2)).support, type(pyro_constraints.sphere))
    with pytest.raises(ValueError, match=r"lives on the sphere .* ProjectedNormalReparam"):
        DropoutGuide(on_the_sphere)()


def test_the_quantiles_of_a_masked_weight_are_its_two_values():
    """A masked weight is 0 with probability p and m / (1 - p) otherwise: its 0.05-quantile is the
    lower value, its 0.95-quantile the higher (p = 0.1)."""
    model = MLP(3, 1, hidden=(4,))
    guide = DropoutGuide(model, dropout=0.1)
    guide(torch.randn(5, 3), torch.randn(5))
    m = guide.median()["hidden.0.weight"]
    q = guide.quantiles([0.05, 0.95])["hidden.0.weight"]
    kept = m / 0.9
    assert torch.allclose(q[0], torch.minimum(kept, torch.zeros_like(kept)))
    assert torch.allclose(q[1], torch.maximum(kept, torch.zeros_like(kept)))
