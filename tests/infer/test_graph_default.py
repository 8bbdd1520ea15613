"""The losses' default: eager for the first steps of each input shape, recorded after (never
compiled), the same training as ``graph="eager"`` draw for draw, and eager without a word where
a graph cannot be exact;
spot checks of every graph's value and gradient against the eager loss
(:mod:`pyro_dropout.infer.recorded.checks`)."""

import copy
import itertools
import warnings

import pyro
import pytest
import torch
from pyro.infer import SVI

from pyro_dropout import BBAlpha, DropoutELBO, DropoutGuide
from pyro_dropout.infer.recorded.checks import CHECK_EVERY, SpotChecks
from pyro_dropout.infer.recorded.graph import WARM_UP
from pyro_dropout.nn import MLP

STEPS = WARM_UP + 12  # past the eager warm-up: recorded steps, spot-checked ones among them


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


@pytest.mark.parametrize(
    "make",
    [
        lambda **kw: DropoutELBO(**kw),
        lambda **kw: DropoutELBO(num_particles=3, per_example_masks=True, **kw),
        lambda **kw: BBAlpha(0.5, num_particles=3, **kw),
    ],
    ids=["elbo", "elbo-per-example", "bbalpha"],
)
def test_the_default_records_after_the_warm_up_and_trains_as_eager(make):
    loss = make()
    assert loss.graph == "record" and loss.graph_default
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the default says nothing
        losses = _fit(loss)
    (graph,) = loss.graph_losses.values()
    assert len(graph.recorded.graphs) == 1 and graph.recorded.checks.calls == STEPS - 1 - WARM_UP
    # the same draws as the eager loss: the graph keeps every random draw, even an unused one
    # (per-example masks draw the guide's per-draw mask too), so the numbers agree to rounding
    assert losses == pytest.approx(_fit(make(graph="eager")), rel=1e-5)


def test_a_short_fit_is_never_recorded():
    loss = DropoutELBO()
    _fit(loss, steps=WARM_UP)
    (graph,) = loss.graph_losses.values()
    assert not graph.recorded.graphs


def test_a_shape_seen_rarely_is_not_recorded():
    """Each batch size counts its own eager steps: one seen in a step of four (a last batch)
    waits four times as long; every size here has fewer than WARM_UP steps."""
    loss = DropoutELBO()
    _fit(loss, steps=3 * WARM_UP, sizes=(16, 15, 14, 13))
    (graph,) = loss.graph_losses.values()
    assert not graph.recorded.graphs


def test_a_loss_reading_a_value_runs_eagerly_without_a_warning():
    """Where ``graph="record"`` warns, the default (which never asked for a graph) is silent, and exact."""

    class Reads(MLP):
        def forward(self, x, y=None):
            return super().forward(x if float(x.mean()) > 0 else -x, y)

    pyro.clear_param_store()
    model = Reads(3, 1, hidden=(8,))
    loss = DropoutELBO()
    svi = SVI(model, DropoutGuide(model, dropout=0.2), pyro.optim.Adam({"lr": 1e-2}), loss)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for step in range(STEPS):
            svi.step(torch.randn(16, 3) + (-1) ** step, torch.randn(16))
    (graph,) = loss.graph_losses.values()
    assert "reads a tensor's value" in graph.recorded.eager and not graph.recorded.graphs


def test_parameters_outside_the_store_run_eagerly_by_default():
    pyro.clear_param_store()
    with pyro.settings.context(module_local_params=True):
        model = MLP(3, 1, hidden=(8,))
        loss = DropoutELBO()
        svi = SVI(model, DropoutGuide(model, dropout=0.2), pyro.optim.Adam({"lr": 1e-2}), loss)
        for _ in range(STEPS):
            assert torch.isfinite(torch.tensor(svi.step(torch.randn(16, 3), torch.randn(16))))
    (graph,) = loss.graph_losses.values()
    assert graph.outside and not graph.recorded.graphs


def test_one_loss_object_keeps_few_models_and_copies_without_graphs():
    loss = DropoutELBO()
    for _ in range(6):
        _fit(loss, steps=2)
    assert len(loss.graph_losses) == 4  # the latest models only: the earlier ones are freed
    copied = copy.deepcopy(loss)
    assert "graph_losses" not in vars(copied) and copied.graph == "record" and copied.graph_default


def test_spot_checks_come_at_doubling_intervals_up_to_the_cap():
    checks, due = SpotChecks(), []
    for call in range(1, 2000):
        if checks.calls + 1 == checks.due:
            due.append(call)
        checks.run(lambda: torch.tensor(1.0), (), 0, lambda: torch.tensor(1.0))
    assert due[:7] == [1, 2, 4, 8, 16, 32, 96]
    gaps = [b - a for a, b in itertools.pairwise(due)]
    assert max(gaps) == CHECK_EVERY and gaps[-1] == CHECK_EVERY


def test_a_spot_check_compares_values_and_gradients():
    checks = SpotChecks()
    checks.run(lambda: torch.tensor(2.0), (), 0, lambda: torch.tensor(1.0))
    assert "the graph gave 2 where the loss run eagerly gives 1" in checks.stale
    checks = SpotChecks()  # rounding is not a change: within RTOL of the loss's size
    assert float(checks.run(lambda: torch.tensor(1000.5), (), 0, lambda: torch.tensor(1000.0))) == 1000.5
    assert not checks.stale
    w = torch.ones(3, requires_grad=True)
    checks = SpotChecks()  # the same value, another gradient
    checks.run(lambda w: (w * w).sum(), (w,), 1, lambda: w.sum())  # 3 both, gradients 2 and 1
    assert "gradient differs" in checks.stale


SCALE = {"value": 1.0}  # a global the model reads: no key can see it change


class Scaled(MLP):
    def forward(self, x, y=None):
        return super().forward(x * SCALE["value"], y)


def test_the_default_records_again_a_graph_that_a_global_change_made_stale():
    pyro.clear_param_store()
    pyro.set_rng_seed(0)
    model = Scaled(3, 1, hidden=(8,))
    svi = SVI(model, DropoutGuide(model, dropout=0.2), pyro.optim.Adam({"lr": 1e-2}), DropoutELBO())
    x = torch.randn(16, 3)
    try:
        for _ in range(WARM_UP + 4):
            svi.step(x, x.sum(-1))  # recorded, and the first checks passed
        SCALE["value"] = 3.0
        with pytest.warns(
            UserWarning, match="a value outside the model's and guide's modules .* recorded again"
        ):
            for _ in range(CHECK_EVERY):
                svi.step(x, x.sum(-1))
    finally:
        SCALE["value"] = 1.0


@pytest.mark.parametrize("traced", [False, True], ids=["eager-steps", "recorded-steps"])
@pytest.mark.parametrize("arg", [0, 1])
def test_an_input_holding_nan_is_named_and_nothing_is_updated(traced, arg):
    # the inputs are checked once the loss is not finite, in the eager steps and the recorded ones
    pyro.clear_param_store()
    model = MLP(3, 1, hidden=(8,))
    svi = SVI(model, DropoutGuide(model, dropout=0.2), pyro.optim.Adam({"lr": 1e-2}), DropoutELBO())
    x = torch.randn(16, 3)
    for _ in range(WARM_UP + 2 if traced else 2):
        svi.step(x, x.sum(-1), num_data=100)
    before = {k: v.detach().clone() for k, v in pyro.get_param_store().items()}
    inputs = [x.clone(), x.sum(-1)]
    inputs[arg][3] = float("nan")
    with pytest.raises(ValueError, match=rf"model argument {arg} \(shape .*\) contains NaN or inf"):
        svi.step(*inputs, num_data=100)
    for name, value in pyro.get_param_store().items():
        assert torch.equal(value.detach(), before[name]), name
