"""Property-based checks of the public API: for any argument drawn from valid and invalid ranges,
a call either succeeds with finite outputs of the documented shape, or raises ``ValueError`` /
``TypeError`` whose message names the argument. A bounded profile runs by default (25 examples
a property, seeded by hypothesis' database-free derandomised mode); the slow tests run 300."""

from __future__ import annotations

import math

import pyro
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyro_dropout import BBAlpha, CompiledSVI, DropoutELBO, DropoutGuide, evaluate, predict
from pyro_dropout.metrics import rmse
from pyro_dropout.nn import MLP

PROFILES = [pytest.param(25, id="bounded"), pytest.param(300, id="long", marks=pytest.mark.slow)]
ANY_NUMBER = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, width=64),
    st.integers(-3, 3),
    st.booleans(),
    st.none(),
    st.text(max_size=3),
    st.lists(st.floats(0, 1), max_size=2),
)
COUNT = st.one_of(st.integers(-3, 6), st.booleans(), st.floats(-2, 6), st.none(), st.text(max_size=2))


def _check(call, names: tuple[str, ...]):
    """Run ``call``; it returns, or raises ValueError/TypeError naming one of ``names``."""
    try:
        return call()
    except (ValueError, TypeError) as e:
        assert any(n in str(e) for n in names), f"the error does not name {names}: {e}"
        return None


def _run(examples, test):
    """``test`` with ``examples`` derandomised examples (the same ones on every run)."""
    return settings(
        max_examples=examples,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )(test)


def _data(n=6):
    g = torch.Generator().manual_seed(0)
    return torch.randn(n, 3, generator=g), torch.randn(n, generator=g)


@pytest.mark.parametrize("examples", PROFILES)
def test_dropout_guide_rates(examples):
    @given(p=ANY_NUMBER, concrete=st.booleans())
    def prop(p, concrete):
        pyro.clear_param_store()
        model = MLP(3, hidden=(4,))
        key = "init_dropout" if concrete else "dropout"
        guide = _check(lambda: DropoutGuide(model, concrete=concrete, **{key: p}), (key,))
        if guide is None:
            return
        x, y = _data()
        svi = pyro.infer.SVI(model, guide, pyro.optim.Adam({"lr": 1e-2}), DropoutELBO())
        loss = _check(lambda: svi.step(x, y), (key,))
        if loss is not None:
            assert math.isfinite(loss)
            rates = guide.dropout_rates()
            assert all(bool(((r >= 0) & (r < 1)).all()) for r in rates.values())

    _run(examples, prop)()


@pytest.mark.parametrize("examples", PROFILES)
def test_predict_and_evaluate_counts(examples):
    pyro.clear_param_store()
    model = MLP(3, hidden=(4,))
    guide = DropoutGuide(model, dropout=0.2)
    x, y = _data()
    guide(x, y)

    @given(num_samples=COUNT, chunk_size=COUNT)
    def prop(num_samples, chunk_size):
        pred = _check(
            lambda: predict(model, guide, x, num_samples=num_samples, chunk_size=chunk_size),
            ("num_samples", "chunk_size"),
        )
        if pred is not None:
            assert pred["obs"].shape == (num_samples, 6) and bool(torch.isfinite(pred["obs"]).all())
        report = _check(
            lambda: evaluate(model, guide, x, y, num_samples=num_samples, chunk_size=chunk_size),
            ("num_samples", "chunk_size", "at least 2 draws"),
        )
        if report is not None:
            assert math.isfinite(report.test_ll) and report.num_samples == num_samples

    _run(examples, prop)()


@pytest.mark.parametrize("examples", PROFILES)
def test_steps_on_drawn_data(examples):
    """Data of any size and scale: a finite loss, or an error naming the argument or the divergence."""

    @given(
        n=st.integers(0, 5),
        scale=st.sampled_from([1.0, 1e3, 1e20, float("nan"), float("inf")]),
        loss=st.sampled_from(["elbo", "bbalpha"]),
        compiled=st.booleans(),
    )
    def prop(n, scale, loss, compiled):
        pyro.clear_param_store()
        model = MLP(3, hidden=(4,))
        objective = DropoutELBO() if loss == "elbo" else BBAlpha(0.5, num_particles=3)
        svi = (CompiledSVI if compiled else pyro.infer.SVI)(
            model, DropoutGuide(model), pyro.optim.Adam({"lr": 1e-2}), objective
        )
        x, y = _data(n)
        value = _check(lambda: svi.step(x * scale, y), ("model argument 0",))
        if value is not None:
            assert math.isfinite(value)
            assert all(bool(torch.isfinite(p).all()) for _, p in pyro.get_param_store().named_parameters())

    _run(examples, prop)()


@pytest.mark.parametrize("examples", PROFILES)
def test_metric_inputs(examples):
    @given(n=st.integers(0, 4), m=st.integers(0, 4), bad=st.sampled_from([None, "nan", "inf", "list"]))
    def prop(n, m, bad):
        mean, y = torch.randn(n), torch.randn(m)
        if bad == "nan" and n:
            mean[0] = float("nan")
        if bad == "inf" and m:
            y[-1] = float("inf")
        args = (mean.tolist(), y.tolist()) if bad == "list" else (mean, y)
        value = _check(lambda: rmse(*args), ("mean", "y", "rmse"))
        if value is not None:
            assert math.isfinite(value) and value >= 0

    _run(examples, prop)()
