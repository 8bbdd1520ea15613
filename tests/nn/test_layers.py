import pyro
import pytest
import torch
from pyro import poutine
from pyro.poutine.util import site_is_subsample

from pyro_dropout.distributions import QuantisedGaussian, base_prior
from pyro_dropout.nn import MLP, Conv2d, Linear


def _trace(model, *args, **kwargs):
    return poutine.trace(model).get_trace(*args, **kwargs)


def test_linear_sites_have_quantised_gaussian_priors_from_the_length_scale():
    layer = Linear(3, 4, length_scale=2.0, bias_length_scale=0.5)
    tr = _trace(layer, torch.randn(6, 3))
    w, b = tr.nodes["weight"], tr.nodes["bias"]
    assert w["fn"].event_shape == (4, 3) and b["fn"].event_shape == (4,)
    assert isinstance(base_prior(w["fn"]), QuantisedGaussian)
    assert torch.allclose(base_prior(w["fn"]).scale, torch.tensor(0.5))
    assert torch.allclose(base_prior(b["fn"]).scale, torch.tensor(2.0))
    assert tr.nodes["_RETURN"]["value"].shape == (6, 4)


def test_layers_follow_dtype():
    layer = Linear(3, 4).double()
    tr = _trace(layer, torch.randn(6, 3, dtype=torch.float64))
    assert tr.nodes["weight"]["value"].dtype == torch.float64
    conv = Conv2d(2, 3, 3, padding=1).double()
    tr = _trace(conv, torch.randn(1, 2, 5, 5, dtype=torch.float64))
    assert tr.nodes["weight"]["value"].shape == (3, 2, 3, 3)
    assert tr.nodes["_RETURN"]["value"].shape == (1, 3, 5, 5)


@pytest.mark.parametrize("bad", [0.0, -1.0, float("inf")])
def test_bad_length_scale(bad):
    with pytest.raises(ValueError, match="length_scale"):
        Linear(2, 2, length_scale=bad)


@pytest.mark.parametrize(
    ("kwargs", "y", "sites"),
    [
        ({"tau": 2.0}, torch.randn(8), {"mean", "obs"}),
        ({"tau": "learned"}, torch.randn(8), {"mean", "obs", "tau"}),
        ({"likelihood": "heteroscedastic"}, torch.randn(8), {"mean", "log_var", "obs"}),
        (
            {"likelihood": "categorical", "out_features": 3},
            torch.randint(0, 3, (8,)),
            {"logits", "obs"},
        ),
        ({"out_features": 2, "tau": "learned"}, torch.randn(8, 2), {"mean", "obs", "tau"}),
    ],
)
def test_mlp_variants(kwargs, y, sites):
    model = MLP(4, hidden=(5, 6), **kwargs)
    tr = _trace(model, torch.randn(8, 4), y)
    names = {n for n, s in tr.nodes.items() if s["type"] == "sample" and not site_is_subsample(s)}
    weights = {
        "hidden.0.weight",
        "hidden.0.bias",
        "hidden.1.weight",
        "hidden.1.bias",
        "output.weight",
        "output.bias",
    }
    assert names == weights | sites
    assert tr.nodes["obs"]["value"].shape == y.shape


def test_mlp_scales_minibatches():
    model = MLP(2, hidden=(3,))
    tr = _trace(model, torch.randn(10, 2), torch.randn(10), num_data=1000)
    assert tr.nodes["obs"]["scale"] == pytest.approx(100.0)


def test_mlp_length_scale_per_layer():
    model = MLP(3, hidden=(4, 5), length_scale=[1.0, 2.0, 4.0])
    tr = _trace(model, torch.randn(6, 3), torch.randn(6))
    priors = [base_prior(tr.nodes[f"{n}.weight"]["fn"]) for n in ("hidden.0", "hidden.1", "output")]
    assert [torch.unique(prior.scale).tolist() for prior in priors] == [
        [1.0],
        [0.5],
        [0.25],
    ]  # prior std 1/l, hidden layers first
    with pytest.raises(ValueError, match="one value per weight layer"):
        MLP(3, hidden=(4,), length_scale=[1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="length_scale"):
        MLP(3, hidden=(4,), length_scale=[1.0, -2.0])


def test_mlp_length_scale_per_run():
    # with runs=R a tensor [R] gives each run its own prior (std 1/l) in every layer; per-layer
    # values may mix numbers and tensors
    runs, lengths = 3, torch.tensor([0.5, 1.0, 4.0])
    model = MLP(2, hidden=(4,), runs=runs, tau=1.0, length_scale=[lengths, 2.0])
    tr = _trace(model, torch.randn(runs, 6, 2), torch.randn(runs, 6))
    hidden, output = (base_prior(tr.nodes[f"{n}.weight"]["fn"]) for n in ("hidden.0", "output"))
    assert tr.nodes["hidden.0.weight"]["fn"].batch_shape == (runs, 1)
    assert torch.allclose(hidden.scale, (1 / lengths).reshape(runs, 1, 1, 1).expand(runs, 1, 4, 2))
    assert torch.allclose(base_prior(tr.nodes["hidden.0.bias"]["fn"]).scale[:, 0, 0], 1 / lengths)
    assert torch.unique(output.scale).tolist() == [0.5]
    with pytest.raises(ValueError, match="one value per run"):
        MLP(2, hidden=(4,), length_scale=lengths)  # no runs plate
    with pytest.raises(ValueError, match=r"shape \[R\]"):
        MLP(2, hidden=(4,), runs=2, length_scale=lengths)
    for bad in (torch.tensor([0.5, float("nan"), 1.0]), torch.tensor([0.5, -1.0, 1.0])):
        with pytest.raises(ValueError, match="positive and finite"):
            MLP(2, hidden=(4,), runs=runs, length_scale=bad)


def test_mlp_rejects_bad_arguments():
    with pytest.raises(ValueError, match="likelihood"):
        MLP(2, likelihood="poisson")
    with pytest.raises(ValueError, match="tau"):
        MLP(2, tau=-1.0)
    with pytest.raises(ValueError, match="y has shape"):
        MLP(2)(torch.randn(5, 2), torch.randn(4))
    # a column of targets broadcast against the means into [N, N] log-densities, with no error where
    # no loss checks the sites (NUTS): now refused by the model itself
    with pytest.raises(ValueError, match=r"y has shape \(5, 1\): y must be \(5,\).*y.squeeze\(-1\)"):
        MLP(2)(torch.randn(5, 2), torch.randn(5, 1))
    MLP(2, out_features=3)(torch.randn(5, 2), torch.randn(5, 3))  # several outputs: a vector per row
    with pytest.raises(ValueError, match=r"y must be \(5, 3\)"):
        MLP(2, out_features=3)(torch.randn(5, 2), torch.randn(5))
    with pytest.raises(ValueError, match="classes"):
        MLP(2, likelihood="categorical", out_features=1)


def test_mlp_prior_sample_runs_without_data():
    pyro.set_rng_seed(0)
    out = MLP(2, hidden=(3,))(torch.randn(5, 2))
    assert out.shape == (5,)
