"""Bayesian networks written in other people's styles run with DropoutGuide on every path:
DropoutELBO and BBAlpha(0.5) at its defaults (vectorised particles), Predictive(parallel=True),
predict, evaluate and to_arviz, with draws [S, N] everywhere; where a style cannot take batched
weights, the error names the switch that runs it (and the tests use it). The slow tests compare
each with the same model under AutoNormal, trained the same way, on held-out data."""

import time
import warnings

import pyro
import pytest
import torch
from pyro.infer import SVI, Predictive, Trace_ELBO
from pyro.infer.autoguide import AutoNormal

from pyro_dropout import BBAlpha, DropoutELBO, DropoutGuide, evaluate, predict, to_arviz

from . import styles

# name: (model factory, data, classification, steps, kwargs of every call, batched draws work)
STYLES = {
    "regression-tutorial": (
        lambda: styles.BayesianRegression(3, 1),
        styles.regression_data,
        False,
        1500,
        {},
        True,
    ),
    "raw-at-gamma": (lambda: styles.raw_at_model, styles.raw_at_data, False, 2000, {}, True),
    "categorical": (styles.DigitsClassifier, styles.blob_data, True, 800, {}, True),
    "nested-sequential": (styles.SequentialClassifier, styles.blob_data, True, 800, {}, True),
    "convnet-subsampled": (styles.ConvNet, styles.bar_images, True, 600, {"batch_size": 50}, True),
    "random-module": (lambda: styles.random_module_model, styles.blob_data, True, 800, {}, False),
}


def _fit(model, guide, loss, x, y, steps, **kwargs):
    svi = SVI(model, guide, pyro.optim.Adam({"lr": 0.02}), loss)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # pyro.random_module is deprecated in Pyro
        for _ in range(steps):
            svi.step(x, y, **kwargs)


@pytest.mark.parametrize("style", list(STYLES))
def test_every_path_runs_with_draws_shaped_s_by_n(style):
    make, data, classify, _, kwargs, batched = STYLES[style]
    (x, y), (x_test, y_test) = data()
    model = make()
    guide = DropoutGuide(model)
    _fit(model, guide, DropoutELBO(), x, y, 3, **kwargs)
    assert guide.dropout_rates()  # some weight is masked
    obs = "Y" if style == "raw-at-gamma" else "obs"
    n = len(x_test)
    if batched:
        _fit(model, guide, BBAlpha(0.5), x, y, 3, **kwargs)
        assert Predictive(model, guide=guide, num_samples=4, parallel=True)(x_test)[obs].shape == (4, n)
    else:  # training names the unbatched switch; prediction's self-check runs one draw at a time
        with pytest.warns(
            UserWarning, match=r"the batched pass failed.*one particle at a time|one particle at a time"
        ):
            _fit(model, guide, BBAlpha(0.5), x, y, 1)
        with pytest.warns(UserWarning, match="the batched pass failed"):
            assert predict(model, guide, x_test, num_samples=4)[obs].shape == (4, n)
        _fit(model, guide, BBAlpha(0.5, vectorize_particles=False), x, y, 3)
        assert Predictive(model, guide=guide, num_samples=4)(x_test)[obs].shape == (4, n)
    paths = {"parallel": batched}
    assert predict(model, guide, x_test, num_samples=4, **paths)[obs].shape == (4, n)
    idata = to_arviz(model, guide, x_test, y_test, num_samples=4, **paths)
    assert idata.log_likelihood[obs].shape == (1, 4, n)
    report = evaluate(model, guide, x_test, y_test, num_samples=4, **paths)
    fit_score = report.accuracy if classify else report.test_ll
    assert torch.isfinite(torch.tensor(fit_score))


def _score(model, guide, x, y, classify, parallel):
    draws = Predictive(model, guide=guide, num_samples=200, parallel=parallel)(x)
    obs = draws["Y" if "Y" in draws else "obs"]
    if classify:  # the most frequent class over the draws
        return float((obs.mode(0).values == y).float().mean())
    return float((obs.mean(0) - y).pow(2).mean().sqrt())


@pytest.mark.slow
@pytest.mark.parametrize("style", list(STYLES))
def test_test_error_is_within_ten_percent_of_autonormal(style):
    """Held-out RMSE no more than 1.1x, accuracy no less than 0.9x, AutoNormal's (the issue's bar);
    same model, data, steps and learning rate; seed 0."""
    make, data, classify, steps, kwargs, batched = STYLES[style]
    (x, y), (x_test, y_test) = data()
    scores, times = {}, {}
    for name in ("autonormal", "dropout"):
        pyro.clear_param_store()
        pyro.set_rng_seed(0)
        model = make()
        guide = AutoNormal(model) if name == "autonormal" else DropoutGuide(model)
        loss = Trace_ELBO() if name == "autonormal" else DropoutELBO()
        start = time.perf_counter()
        _fit(model, guide, loss, x, y, steps, **kwargs)
        times[name] = time.perf_counter() - start
        parallel = batched and name == "dropout"  # AutoNormal's PyroModule layers do not broadcast
        scores[name] = _score(model, guide, x_test, y_test, classify, parallel)
    print(f"{style}: {scores}, seconds {times}")
    if classify:
        assert scores["dropout"] >= 0.9 * scores["autonormal"]
    else:
        assert scores["dropout"] <= 1.1 * scores["autonormal"]


def _tyxe_bnn(tyxe, x):
    import pyro.distributions as dist
    from torch import nn

    net = nn.Sequential(nn.Linear(3, 50), nn.Tanh(), nn.Linear(50, 1))
    likelihood = tyxe.likelihoods.HomoskedasticGaussian(len(x), scale=0.9)
    return net, tyxe.priors.IIDPrior(dist.Normal(0.0, 1.0)), likelihood


def test_tyxe_takes_dropout_guide_as_its_guide_builder():
    """TyXe's likelihoods size their plate from the predictions, so batched draws cannot run
    there: the error says so and names the switch; TyXe's own fit and predict run as they are."""
    tyxe = pytest.importorskip("tyxe")
    (x, y), (x_test, y_test) = styles.regression_data()
    y, y_test = y[:, None], y_test[:, None]  # TyXe's Gaussian has event dim 1: targets [N, 1]
    bnn = tyxe.VariationalBNN(*_tyxe_bnn(tyxe, x), net_guide_builder=DropoutGuide)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=len(x))
    bnn.fit(loader, pyro.optim.Adam({"lr": 1e-2}), 3)
    assert set(bnn.net_guide.dropout_rates()) == {"net.0.weight", "net.2.weight"}
    _fit(bnn.model, bnn.guide, DropoutELBO(), x, y, 3)
    with pytest.warns(UserWarning, match="one particle at a time"):  # its plate is sized from the predictions
        _fit(bnn.model, bnn.guide, BBAlpha(0.5), x, y, 1)
    _fit(bnn.model, bnn.guide, BBAlpha(0.5, vectorize_particles=False), x, y, 3)
    n = len(x_test)
    draws = predict(bnn.model, bnn.guide, x_test, num_samples=4, parallel=False)["likelihood.data"]
    assert draws.shape == (4, n, 1)
    idata = to_arviz(bnn.model, bnn.guide, x_test, y_test, num_samples=4, parallel=False)
    assert idata.log_likelihood["likelihood.data"].shape == (1, 4, n)
    assert evaluate(bnn.model, bnn.guide, x_test, y_test, num_samples=4, parallel=False).rmse > 0
    mean, _ = bnn.predict(x_test, num_predictions=4)
    assert mean.shape == (n, 1)


@pytest.mark.slow
def test_tyxe_with_dropout_guide_is_within_ten_percent_of_autonormal():
    tyxe = pytest.importorskip("tyxe")
    (x, y), (x_test, y_test) = styles.regression_data()
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y[:, None]), batch_size=len(x))
    rmse = {}
    for builder in (AutoNormal, DropoutGuide):
        pyro.clear_param_store()
        pyro.set_rng_seed(0)
        bnn = tyxe.VariationalBNN(*_tyxe_bnn(tyxe, x), net_guide_builder=builder)
        bnn.fit(loader, pyro.optim.Adam({"lr": 1e-2}), 1000)
        mean, _ = bnn.predict(x_test, num_predictions=100)
        rmse[builder.__name__] = float((mean.squeeze(-1) - y_test).pow(2).mean().sqrt())
    print(f"tyxe: {rmse}")
    assert rmse["DropoutGuide"] <= 1.1 * rmse["AutoNormal"]


@pytest.mark.parametrize("loss", [DropoutELBO(), BBAlpha(0.5)], ids=["elbo", "bbalpha"])
def test_dropout_guide_inside_an_autoguide_list_takes_batched_draws(loss):
    """Pyro's way to give some sites another guide: ``AutoGuideList`` with each part on a blocked
    model. Before, the guide saw ``poutine.block(model)``, not the module, and left its
    ``PyroModule[nn.Linear]`` unadapted: BB-α fell back to one particle at a time (a warning), and
    ``Predictive(parallel=True)`` raised torch's "t() expects a tensor with <= 2 dimensions"."""
    from pyro import poutine
    from pyro.infer.autoguide import AutoGuideList

    (x, y), _ = styles.regression_data()
    pyro.clear_param_store()
    pyro.set_rng_seed(0)
    model = styles.BayesianRegression(3, 1)
    guide = AutoGuideList(model)
    guide.append(DropoutGuide(poutine.block(model, hide=["sigma"])))
    guide.append(AutoNormal(poutine.block(model, expose=["sigma"])))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fall-back to one particle at a time
        _fit(model, guide, loss, x, y, 50)
    assert guide[0].broadcast_layers == ["linear"]
    draws = Predictive(model, guide=guide, num_samples=30, parallel=True)(x)
    assert draws["obs"].shape == (30, len(x))
    assert predict(model, guide, x, num_samples=30).means["obs"].shape == (30, len(x))


def test_a_model_that_runs_only_one_draw_at_a_time_predicts_evaluates_and_exports():
    """NumPyro's bnn.py (weights [in, out] with batch shapes, shape asserts) runs under Pyro's
    Predictive(parallel=False); predict, evaluate and to_arviz run it one draw at a time, as written
    (on 0a1ecd5 even parallel=False failed: "The expanded size of the tensor (1) must match the
    existing size (3)"), with the same predictive as Pyro's: 400 draws each, a z-test of the two means
    at every point, Bonferroni over the points (|z| < 4.5, about 1e-5 each; seed 0); explain() says
    why its weights are not masked."""
    pyro.set_rng_seed(0)
    (x, y), (x_test, y_test) = styles.regression_data()
    y, y_test = y[:, None], y_test[:, None]
    model = styles.numpyro_bnn_model
    guide = DropoutGuide(model, dropout=0.1)
    with pytest.warns(UserWarning, match="event_dim 0"):
        _fit(model, guide, DropoutELBO(), x, y, 200)
    assert "batch dims (event_dim 0)" in guide.explain()
    n = len(x_test)
    theirs = Predictive(model, guide=guide, num_samples=400, parallel=False)(x_test)["Y"]
    with pytest.warns(UserWarning, match="one draw at a time"):  # found by prediction's self-check
        ours = predict(model, guide, x_test, num_samples=400).samples["Y"]
    alone = predict(model, guide, x_test, num_samples=400, parallel=False).samples["Y"]
    assert ours.shape == alone.shape == theirs.shape == (400, n, 1)
    for draws in (ours, alone):
        spread = (draws.var(0) / len(draws) + theirs.var(0) / len(theirs)).sqrt()
        assert ((draws.mean(0) - theirs.mean(0)).abs() / spread).max() < 4.5
    idata = to_arviz(model, guide, x_test, y_test, num_samples=8, parallel=False)
    assert idata.log_likelihood["Y"].shape == (1, 8, n)
    assert torch.isfinite(torch.tensor(evaluate(model, guide, x_test, y_test, num_samples=8).test_ll))
