"""The losses' default, ``graph="record"``: eager for each call signature's first calls, recorded at
its RECORD_AT-th and replayed under its guard after, the same training as ``graph="eager"`` draw for
draw, eager without a word where no guard can cover the loss (``explain()`` says why), and bad inputs
named on every path."""

import copy
import warnings

import pyro
import pytest
import torch
from pyro.infer import SVI

from pyro_dropout import BBAlpha, DropoutELBO, DropoutGuide
from pyro_dropout.infer.recorded.graph import RECORD_AT
from pyro_dropout.nn import MLP

STEPS = RECORD_AT + 12  # past the eager calls: recorded steps


def _fit(loss, steps=STEPS, sizes=(16,)):
    pyro.set_rng_seed(0)
    pyro.clear_param_store()
    g = torch.Generator().manual_seed(1)
    model = MLP(3, 1, hidden=(8,))
    guide = DropoutGuide(model, dropout=0.2)
    svi = SVI(model, guide, pyro.optim.Adam({"lr": 1e-2}), loss)
    losses = []
    for step in range(steps):
        x = torch.randn(sizes[step % len(sizes)], 3, generator=g)
        losses.append(svi.step(x, x.sum(-1), num_data=100))
    return losses


def _routes(loss):
    (graph,) = loss.graph_losses.values()
    return list(graph.recorded.routes.by_key.values())


@pytest.mark.parametrize(
    "make",
    [
        lambda **kw: DropoutELBO(**kw),
        lambda **kw: DropoutELBO(num_particles=3, per_example_masks=True, **kw),
        lambda **kw: BBAlpha(0.5, num_particles=3, **kw),
    ],
    ids=["elbo", "elbo-per-example", "bbalpha"],
)
def test_the_default_records_at_its_call_and_trains_as_eager(make):
    loss = make()
    assert loss.graph == "record"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the default says nothing
        losses = _fit(loss)
    (route,) = _routes(loss)
    # the first step finds the parameters (eager, outside the routes); the route's calls before
    # RECORD_AT run eagerly, its RECORD_AT-th records (the step itself eager), the rest replay
    assert len(route.graphs) == 1 and route.records == 1 and route.replays == STEPS - 1 - RECORD_AT
    # the same draws as the eager loss: the graph keeps every random draw, even an unused one
    # (per-example masks draw the guide's per-draw mask too), so the numbers agree to rounding
    assert losses == pytest.approx(_fit(make(graph="eager")), rel=1e-5)
    assert "recorded graph, guarded on every call" in loss.explain()


def test_a_short_fit_is_never_recorded():
    loss = DropoutELBO()
    _fit(loss, steps=RECORD_AT)
    (route,) = _routes(loss)
    assert not route.graphs and route.records == 0
    assert f"eager, recorded at its call {RECORD_AT}" in loss.explain()


def test_a_shape_seen_rarely_is_not_recorded():
    """Each batch size counts its own calls: every size here has fewer than RECORD_AT."""
    loss = DropoutELBO()
    _fit(loss, steps=4 * (RECORD_AT - 1), sizes=(16, 15, 14, 13))
    assert all(not r.graphs and r.records == 0 for r in _routes(loss))


class Reads(MLP):
    def forward(self, x, y=None):
        return super().forward(x if float(x.mean()) > 0 else -x, y)


def test_a_loss_reading_a_value_runs_eagerly_without_a_warning_and_explains_where():
    pyro.clear_param_store()
    model = Reads(3, 1, hidden=(8,))
    loss = DropoutELBO()
    svi = SVI(model, DropoutGuide(model, dropout=0.2), pyro.optim.Adam({"lr": 1e-2}), loss)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for step in range(STEPS):
            svi.step(torch.randn(16, 3) + (-1) ** step, torch.randn(16))
    (route,) = _routes(loss)
    assert not route.graphs
    assert "reads a tensor's value" in route.eager and "test_graph_default.py" in route.eager
    assert "if float(x.mean()) > 0" in loss.explain()


def test_parameters_outside_the_store_run_eagerly():
    pyro.clear_param_store()
    with pyro.settings.context(module_local_params=True):
        model = MLP(3, 1, hidden=(8,))
        loss = DropoutELBO()
        svi = SVI(model, DropoutGuide(model, dropout=0.2), pyro.optim.Adam({"lr": 1e-2}), loss)
        for _ in range(STEPS):
            assert torch.isfinite(torch.tensor(svi.step(torch.randn(16, 3), torch.randn(16))))
    (graph,) = loss.graph_losses.values()
    assert graph.outside and not graph.recorded.routes.by_key
    assert "not in Pyro's param store" in loss.explain()


def test_one_loss_object_keeps_few_models_and_copies_without_graphs():
    loss = DropoutELBO()
    for _ in range(6):
        _fit(loss, steps=2)
    assert len(loss.graph_losses) == 4  # the latest models only: the earlier ones are freed
    copied = copy.deepcopy(loss)
    assert "graph_losses" not in vars(copied) and copied.graph == "record"


def test_a_step_inside_a_pyro_handler_runs_eagerly():
    """poutine.scale around the step: a replayed graph would bypass it, so the step is eager."""
    pyro.clear_param_store()
    pyro.set_rng_seed(0)
    model = MLP(3, 1, hidden=(8,))
    loss = DropoutELBO()
    svi = SVI(model, DropoutGuide(model, dropout=0.2), pyro.optim.SGD({"lr": 0.0}), loss)
    x = torch.randn(16, 3)
    for _ in range(STEPS):
        plain = svi.step(x, x.sum(-1))
    pyro.set_rng_seed(5)
    with pyro.poutine.scale(scale=2.0):
        scaled = svi.step(x, x.sum(-1))
    pyro.set_rng_seed(5)
    assert scaled == pytest.approx(2 * svi.step(x, x.sum(-1)), rel=1e-5) and plain == plain
    assert "calls inside Pyro's ScaleMessenger ran eagerly" in loss.explain()


@pytest.mark.parametrize("traced", [False, True], ids=["eager-steps", "recorded-steps"])
@pytest.mark.parametrize("arg", [0, 1])
def test_an_input_holding_nan_is_named_and_nothing_is_updated(traced, arg):
    # the inputs are checked once the loss is not finite, in the eager steps and the recorded ones
    pyro.clear_param_store()
    model = MLP(3, 1, hidden=(8,))
    svi = SVI(model, DropoutGuide(model, dropout=0.2), pyro.optim.Adam({"lr": 1e-2}), DropoutELBO())
    x = torch.randn(16, 3)
    for _ in range(RECORD_AT + 2 if traced else 2):
        svi.step(x, x.sum(-1), num_data=100)
    before = {k: v.detach().clone() for k, v in pyro.get_param_store().items()}
    inputs = [x.clone(), x.sum(-1)]
    inputs[arg][3] = float("nan")
    with pytest.raises(ValueError, match=rf"model argument {arg} \(shape .*\) contains NaN or inf"):
        svi.step(*inputs, num_data=100)
    for name, value in pyro.get_param_store().items():
        assert torch.equal(value.detach(), before[name]), name
