"""Recorded graphs that cannot lie: a loss that branches on its data runs eagerly with a warning
naming the line, a changed model attribute makes a new graph, and a changed global is found by a
spot check within CHECK_EVERY steps and recorded again (:mod:`pyro_dropout.infer.recorded`). Each
case here gave a wrong loss in a recording that did not look (40.8 against the eager 28.8 for the
branch, 266.8 against 23.3 for the attribute)."""

import warnings

import pyro
import pyro.distributions as dist
import pytest
import torch
from pyro.infer import SVI
from pyro.nn import PyroModule

from pyro_dropout import BBAlpha, CompiledSVI, DropoutELBO, DropoutGuide
from pyro_dropout.infer.recorded.checks import CHECK_EVERY
from pyro_dropout.nn import MLP, Linear

SHIFT = {"value": 0.0}  # a global the model reads: no trace can see it change


class Branchy(PyroModule):
    """A regression whose mean jumps by 10 where the batch's inputs are positive on average."""

    def __init__(self, branch=True):
        super().__init__()
        self.hidden, self.out = Linear(1, 16), Linear(16, 1)
        self.noise, self.branch = 1.0, branch

    def forward(self, x, y=None):
        mean = self.out(torch.relu(self.hidden(x))).squeeze(-1) + SHIFT["value"]
        if self.branch and x.mean() > 0:
            mean = mean + 10.0
        with pyro.plate("data", x.shape[0]):
            pyro.sample("obs", dist.Normal(mean, self.noise), obs=y)
        return mean


def _setup(loss, branch=True, compiled=False):
    pyro.clear_param_store()
    pyro.set_rng_seed(0)
    model = Branchy(branch)
    guide = DropoutGuide(model, dropout=0.1)
    if compiled:
        return model, guide, CompiledSVI(model, guide, pyro.optim.Adam({"lr": 0.0}), loss, graph="record")
    svi = SVI(model, guide, pyro.optim.Adam({"lr": 0.0}), loss)
    return model, guide, svi


def _eager(model, guide, x, y):
    elbo = DropoutELBO()
    elbo.loss(model, guide, x, y)  # its first call guesses the plates, drawing once
    pyro.set_rng_seed(3)
    return elbo.loss(model, guide, x, y)


def _stepped(svi, x, y):
    pyro.set_rng_seed(3)
    return svi.step(x, y)


LOSSES = {
    "elbo-record": (lambda: DropoutELBO(graph="record"), False),
    "bbalpha-record": (lambda: BBAlpha(0.5, graph="record"), False),
    "compiled-svi": (lambda: DropoutELBO(), True),
}
X = torch.linspace(0.1, 2.0, 32).unsqueeze(-1)
Y = torch.zeros(32)


@pytest.mark.parametrize("name", LOSSES)
def test_a_loss_that_branches_on_its_data_runs_eagerly_and_names_the_line(name):
    make, compiled = LOSSES[name]
    model, guide, svi = _setup(make(), compiled=compiled)
    named = r"reads a tensor's value in Python at .*test_recorded_keys\.py:\d+ \(if self\.branch"
    with pytest.warns(UserWarning, match=named):
        for _ in range(3):
            svi.step(X, Y)
    # the other branch, as the eager loss takes it (a graph would have kept the first: ~1600)
    eager = _eager(model, guide, -X, Y)
    assert eager < 500
    if name != "bbalpha-record":  # the same objective: the same number under the same seed
        assert _stepped(svi, -X, Y) == pytest.approx(eager, rel=1e-5)
    else:
        assert _stepped(svi, -X, Y) < 500


@pytest.mark.parametrize("name", ["elbo-record", "compiled-svi"])
def test_a_changed_model_attribute_makes_a_new_graph(name):
    make, compiled = LOSSES[name]
    model, guide, svi = _setup(make(), branch=False, compiled=compiled)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # branch-free: recorded, without a word
        for _ in range(3):
            svi.step(X, Y)
        model.noise = 0.1
        assert _stepped(svi, X, Y) == pytest.approx(_eager(model, guide, X, Y), rel=1e-4)


class ModeDropout(Branchy):
    """A functional dropout that reads the module's mode, as a network written for PyTorch does."""

    def forward(self, x, y=None):
        h = torch.nn.functional.dropout(torch.relu(self.hidden(x)), 0.5, self.training)
        mean = self.out(h).squeeze(-1)
        with pyro.plate("data", x.shape[0]):
            pyro.sample("obs", dist.Normal(mean, self.noise), obs=y)


@pytest.mark.parametrize("name", ["elbo-record", "compiled-svi"])
def test_the_modules_mode_is_part_of_the_key(name):
    """``model.eval()`` after a graph was recorded in training mode: the next step records anew and
    gives the eager loss (before, the mode was not read and the graph kept dropping for up to 63 steps)."""
    make, compiled = LOSSES[name]
    pyro.clear_param_store()
    model = ModeDropout(branch=False)
    guide = DropoutGuide(model, dropout=0.1)
    opt = pyro.optim.Adam({"lr": 0.0})
    svi = (
        CompiledSVI(model, guide, opt, make(), graph="record") if compiled else SVI(model, guide, opt, make())
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # recorded, then recorded anew, without a word
        for _ in range(3):
            svi.step(X, Y)
        model.eval()
        assert _stepped(svi, X, Y) == pytest.approx(_eager(model, guide, X, Y), rel=1e-5)


def test_an_attribute_changed_at_every_step_ends_in_the_eager_loss_with_a_warning():
    model, guide, svi = _setup(DropoutELBO(graph="record"), branch=False)
    svi.step(X, Y)
    with pytest.warns(UserWarning, match=r"model\.noise changed at 5 of \d+ calls"):
        for step in range(8):
            model.noise = 1.0 + step
            svi.step(X, Y)
    assert _stepped(svi, X, Y) == pytest.approx(_eager(model, guide, X, Y), rel=1e-5)


@pytest.mark.parametrize("name", ["elbo-record", "compiled-svi"])
def test_a_global_change_is_found_by_a_spot_check_within_its_interval_and_recorded_again(name):
    """A global is frozen in the graph unseen; a spot check (at most CHECK_EVERY steps of the graph
    later: the bound the docs state) finds the graph and the eager loss apart, warns and records
    again, and the next step is the eager loss's; ``retrace()`` records at once."""
    make, compiled = LOSSES[name]
    loss = make()
    model, guide, svi = _setup(loss, branch=False, compiled=compiled)
    try:
        for _ in range(3):
            svi.step(X, Y)
        SHIFT["value"] = 5.0
        stale = 0
        with pytest.warns(UserWarning, match=r"the graph gave .* eagerly gives .*recorded again"):
            while stale < CHECK_EVERY and not _warned(svi, X, Y):
                stale += 1
        assert stale < CHECK_EVERY  # the stale graph trained fewer steps than the interval
        fresh, eager = _stepped(svi, X, Y), _eager(model, guide, X, Y)
        assert fresh == pytest.approx(eager, rel=1e-4)
        SHIFT["value"] = 2.0
        (svi if compiled else loss).retrace()
        assert _stepped(svi, X, Y) == pytest.approx(_eager(model, guide, X, Y), rel=1e-4)
    finally:
        SHIFT["value"] = 0.0


def _warned(svi, x, y) -> bool:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        svi.step(x, y)
    for w in caught:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return any("recorded again" in str(w.message) for w in caught)


@pytest.mark.parametrize(
    "make",
    [lambda: DropoutELBO(graph="record"), lambda: BBAlpha(0.5, num_particles=4, graph="record")],
    ids=["elbo", "bbalpha"],
)
def test_comparisons_of_shapes_do_not_count_as_reading_values(make):
    """A new batch size (a DataLoader's last batch) records again; the checks made once per input
    shape (the particles' batching self-check reads values) run before recording, not in it."""
    pyro.clear_param_store()
    model = MLP(3, 1, hidden=(8,))
    svi = SVI(model, DropoutGuide(model), pyro.optim.Adam({"lr": 1e-2}), make())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for n in (16, 7, 16):
            x = torch.randn(n, 3)
            svi.step(x, x.sum(-1))
    (graph,) = svi.loss_and_grads.__self__.graph_losses.values()
    assert not graph.recorded.eager and len(graph.recorded.graphs) == 2


def test_the_state_watch_gives_python_states_answer_after_every_kind_of_change():
    """StateWatch recomputes the modules' state only when something moved; after each change a
    trace must see, it agrees with python_state (and between changes it returns the same state)."""
    from pyro_dropout.infer.recorded.state import StateWatch, python_state

    model = MLP(3, 1, hidden=(4,))
    guide = DropoutGuide(model, dropout=0.1)
    guide(torch.randn(5, 3), torch.randn(5))
    model.sizes = [1, 2]
    watch = StateWatch(model, guide)
    first = watch()
    assert first == python_state(model, guide) and watch() is first  # nothing moved: not recomputed
    changes = [
        lambda: setattr(model, "noise", 0.5),  # a new attribute
        lambda: setattr(model, "noise", 0.25),  # a changed number
        lambda: model.hidden[0].prior_loc.add_(1.0),  # a buffer changed in place
        lambda: setattr(model.hidden[0], "prior_loc", torch.zeros(())),  # a buffer replaced
        lambda: model.sizes.append(3),  # a list of numbers changed in place
        lambda: model.sizes.append(torch.zeros(1)),  # no longer a list of numbers
        lambda: model.sizes.pop(),  # a list of numbers again
        lambda: setattr(guide, "temperature", 0.2),
        lambda: setattr(model, "extra", Linear(2, 2)),  # a new submodule
        lambda: delattr(model, "noise"),
        lambda: setattr(model, "renamed", 0.25),  # deleted one attribute, added another
        lambda: model.eval(),  # the mode, which F.dropout(x, p, self.training) reads
    ]
    for change in changes:
        before = watch()
        change()
        now = watch()
        assert now == python_state(model, guide)
        assert now != before


def test_a_model_wrapped_by_pyros_handlers_is_read_inside_them():
    """SVI(poutine.block(model, ...), guide): the module's values are still part of the trace's key
    (before, only module objects were read, and a handler is a function)."""
    from pyro import poutine

    from pyro_dropout.infer.recorded.state import StateWatch, python_state

    model = MLP(3, 1, hidden=(4,))
    blocked = poutine.block(model, hide=["nothing"])
    watch = StateWatch(blocked)
    before = watch()
    assert before == python_state(model) and before
    model.noise = 0.5
    assert watch() == python_state(blocked) != before
