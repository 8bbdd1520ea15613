"""Recorded graphs that cannot lie: a loss that branches on its data runs eagerly and says where, a
changed model attribute or mode or loss setting is seen at the next step, what changes at most steps
ends eager, the guard's quick check agrees with a full reading after every kind of change, and what
no guard can cover (the clock, Python's random numbers, a print, a write to a global, a changed
container) runs eagerly with its reason (:mod:`pyro_dropout.guards`). Each case here once gave a
wrong loss in a recording that did not look (40.8 against the eager 28.8 for the branch, 266.8
against 23.3 for the attribute)."""

import random
import time
import warnings

import pyro
import pyro.distributions as dist
import pytest
import torch
from pyro import poutine
from pyro.infer import SVI
from pyro.nn import PyroModule

from pyro_dropout import BBAlpha, CompiledSVI, DropoutELBO, DropoutGuide
from pyro_dropout.guards import Guard, object_roots
from pyro_dropout.infer.recorded.graph import RECORD_AT
from pyro_dropout.nn import MLP, Linear

LOG: list = []  # a global a forward appends to


class Branchy(PyroModule):
    """A regression whose mean jumps by 10 where the batch's inputs are positive on average."""

    def __init__(self, branch=True):
        super().__init__()
        self.hidden, self.out = Linear(1, 16), Linear(16, 1)
        self.noise, self.branch = 1.0, branch

    def mean(self, x):
        mean = self.out(torch.relu(self.hidden(x))).squeeze(-1)
        if self.branch and x.mean() > 0:
            mean = mean + 10.0
        return mean

    def forward(self, x, y=None):
        mean = self.mean(x)
        with pyro.plate("data", x.shape[0]):
            pyro.sample("obs", dist.Normal(mean, self.noise), obs=y)
        return mean


def _setup(loss, model=None, compiled=False):
    pyro.clear_param_store()
    pyro.set_rng_seed(0)
    model = Branchy(False) if model is None else model
    guide = DropoutGuide(model, dropout=0.1)
    if compiled:
        return model, guide, CompiledSVI(model, guide, pyro.optim.Adam({"lr": 0.0}), loss, graph="record")
    return model, guide, SVI(model, guide, pyro.optim.Adam({"lr": 0.0}), loss)


def _eager(model, guide, x, y):
    elbo = DropoutELBO(graph="eager")
    elbo.loss(model, guide, x, y)  # its first call guesses the plates, drawing once
    pyro.set_rng_seed(3)
    return elbo.loss(model, guide, x, y)


def _stepped(svi, x, y):
    pyro.set_rng_seed(3)
    return svi.step(x, y)


def _explain(svi):
    return svi.explain() if isinstance(svi, CompiledSVI) else svi.loss_and_grads.__self__.explain()


LOSSES = {
    "elbo": (lambda: DropoutELBO(), False),
    "bbalpha": (lambda: BBAlpha(0.5), False),
    "compiled-svi": (lambda: DropoutELBO(), True),
}
X = torch.linspace(0.1, 2.0, 32).unsqueeze(-1)
Y = torch.zeros(32)


def _warm(svi, steps=RECORD_AT + 2):
    for _ in range(steps):
        svi.step(X, Y)


@pytest.mark.parametrize("name", LOSSES)
def test_a_loss_that_branches_on_its_data_runs_eagerly_and_names_the_line(name):
    make, compiled = LOSSES[name]
    model, guide, svi = _setup(make(), Branchy(True), compiled=compiled)
    _warm(svi)
    assert "if self.branch and x.mean() > 0" in _explain(svi)  # the line, in the user's file
    # the other branch, as the eager loss takes it (a graph would have kept the first: ~1600)
    eager = _eager(model, guide, -X, Y)
    assert eager < 500
    if name != "bbalpha":  # the same objective: the same number under the same seed
        assert _stepped(svi, -X, Y) == pytest.approx(eager, rel=1e-5)
    else:
        assert _stepped(svi, -X, Y) < 500


@pytest.mark.parametrize("name", ["elbo", "compiled-svi"])
def test_a_changed_model_attribute_is_seen_at_the_next_step(name):
    make, compiled = LOSSES[name]
    model, guide, svi = _setup(make(), compiled=compiled)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # branch-free: recorded, without a word
        _warm(svi)
        model.noise = 0.1
        assert _stepped(svi, X, Y) == pytest.approx(_eager(model, guide, X, Y), rel=1e-4)


class ModeDropout(Branchy):
    """A functional dropout that reads the module's mode, as a network written for PyTorch does."""

    def mean(self, x):
        h = torch.nn.functional.dropout(torch.relu(self.hidden(x)), 0.5, self.training)
        return self.out(h).squeeze(-1)


@pytest.mark.parametrize("name", ["elbo", "compiled-svi"])
def test_the_modules_mode_is_read_by_the_guard(name):
    make, compiled = LOSSES[name]
    model, guide, svi = _setup(make(), ModeDropout(False), compiled=compiled)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _warm(svi)
        model.eval()
        assert _stepped(svi, X, Y) == pytest.approx(_eager(model, guide, X, Y), rel=1e-5)


def test_a_loss_setting_changed_is_seen_at_the_next_step():
    """``loss.alpha`` changed between steps: the objective's settings are read by the guard."""
    loss = BBAlpha(0.5, num_particles=4)
    model, guide, svi = _setup(loss)
    _warm(svi)
    loss.alpha = 1.0
    pyro.set_rng_seed(3)
    got = svi.step(X, Y)
    reference = BBAlpha(1.0, num_particles=4, graph="eager")
    reference.loss(model, guide, X, Y)
    pyro.set_rng_seed(3)
    assert got == pytest.approx(reference.loss(model, guide, X, Y), rel=1e-5)


def test_an_attribute_changed_at_every_step_ends_in_the_eager_loss():
    model, guide, svi = _setup(DropoutELBO())
    _warm(svi)
    for step in range(12):
        model.noise = 1.0 + step
        svi.step(X, Y)
    assert "changed at most calls" in _explain(svi)
    assert _stepped(svi, X, Y) == pytest.approx(_eager(model, guide, X, Y), rel=1e-5)


class Clock(Branchy):
    def mean(self, x):
        return super().mean(x) + 0 * time.time()


class PythonRandom(Branchy):
    def mean(self, x):
        return super().mean(x) * random.uniform(1.0, 1.0)


class Printing(Branchy):
    def mean(self, x):
        print("a step")
        return super().mean(x)


class Appending(Branchy):
    def mean(self, x):
        LOG.append(1)
        return super().mean(x)


class Counting(Branchy):
    def mean(self, x):
        self.calls = getattr(self, "calls", 0) + 1
        return super().mean(x)


@pytest.mark.parametrize(
    "model, why",
    [
        (Clock, "calls time.time"),
        (PythonRandom, "calls random.Random.random"),
        (Printing, "calls builtins.print"),
        (Appending, "list.append"),
        (Counting, "changes the model while it runs"),
    ],
    ids=["clock", "python-random", "print", "append", "counter"],
)
def test_what_no_guard_can_cover_runs_eagerly_with_its_reason(model, why):
    """A replayed graph would freeze the clock and Python's random numbers, and skip a print, an
    append to a global list and a counter the forward keeps: each runs eagerly at every step, as
    often as under the eager loss."""
    counts = []
    for graph in ("eager", "record"):
        built = model(False)
        _, _, svi = _setup(DropoutELBO(graph=graph), built)
        LOG.clear()
        _warm(svi, RECORD_AT + 5)
        counts.append((len(LOG), getattr(built, "calls", 0)))
    assert why in _explain(svi)
    assert counts[0] == counts[1]


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
    loss = make()
    svi = SVI(model, DropoutGuide(model), pyro.optim.Adam({"lr": 1e-2}), loss)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for n in [16] * RECORD_AT + [7] * RECORD_AT + [16]:
            x = torch.randn(n, 3)
            svi.step(x, x.sum(-1))
    (graph,) = loss.graph_losses.values()
    routes = list(graph.recorded.routes.by_key.values())
    assert [r.eager for r in routes] == ["", ""] and all(len(r.graphs) == 1 for r in routes)


def test_the_guards_quick_check_agrees_with_a_full_reading_after_every_kind_of_change():
    """The quick check (the steps of the last reading, checked in C) finds every change a full
    reading finds, and between changes gives the same fingerprint without reading."""
    model = MLP(3, 1, hidden=(4,))
    guide = DropoutGuide(model, dropout=0.1)
    guide(torch.randn(5, 3), torch.randn(5))
    model.sizes = [1, 2]
    model.cfg = {"noise": 0.5}
    guard = Guard(object_roots(model, guide))
    first = guard.read()[0]
    assert guard.now() is first  # nothing moved: the last fingerprint, not read again
    changes = [
        lambda: setattr(model, "noise", 0.5),  # a new attribute
        lambda: setattr(model, "noise", 0.25),  # a changed number
        lambda: model.hidden[0].prior_loc.add_(1.0),  # a buffer changed in place
        lambda: setattr(model.hidden[0], "prior_loc", torch.zeros(())),  # a buffer replaced
        lambda: model.sizes.append(3),  # a list changed in place
        lambda: model.sizes.pop(),
        lambda: model.cfg.update(noise=0.25),  # a dict changed in place
        lambda: setattr(guide, "temperature", 0.2),
        lambda: setattr(model, "extra", Linear(2, 2)),  # a new submodule
        lambda: delattr(model, "noise"),
        lambda: setattr(model, "renamed", 0.25),  # deleted one attribute, added another
        lambda: model.eval(),  # the mode, which F.dropout(x, p, self.training) reads
        lambda: pyro.param("a new parameter", torch.zeros(2)),  # the param store
        lambda: torch.set_grad_enabled(False),  # PyTorch's modes
    ]
    try:
        for change in changes:
            before = guard.now()
            change()
            now = guard.now()
            assert now == guard.read()[0]
            assert now != before
    finally:
        torch.set_grad_enabled(True)


def test_a_model_wrapped_by_pyros_handlers_is_read_inside_them():
    """SVI(poutine.block(model, ...), guide): the module behind the handler is read by the guard."""
    model = MLP(3, 1, hidden=(4,))
    blocked = poutine.block(model, hide=["nothing"])
    guard = Guard(object_roots(blocked, None))
    before = guard.read()[0]
    model.noise = 0.5
    assert guard.now() != before


GROWING = {"values": []}  # a global container the model holds, which grows after recording


class Holding(Branchy):
    def __init__(self):
        super().__init__(False)
        self.table = GROWING


def test_what_a_guard_reads_growing_past_its_budget_turns_the_signature_eager():
    """After recording, a container the guard reads grows past 20,000 values: the next step runs
    eagerly, with the reason, instead of comparing that much at every step (or failing)."""
    from pyro_dropout.guards import BUDGET

    model, guide, svi = _setup(DropoutELBO(), Holding())
    GROWING["values"] = []
    try:
        _warm(svi)
        GROWING["values"].extend(range(BUDGET + 1))
        assert _stepped(svi, X, Y) == pytest.approx(_eager(model, guide, X, Y), rel=1e-5)
        assert "grew too large to compare" in _explain(svi)
    finally:
        GROWING["values"] = []


def test_a_recording_that_cannot_be_checked_runs_eagerly(monkeypatch):
    """The admission run failing (the graph, or the call run again) is a reason to stay eager, not
    an error of the user's step."""
    from pyro_dropout.infer.recorded import routes

    def failing(*args, **kwargs):
        raise RuntimeError("no check today")

    monkeypatch.setattr(routes, "admitted", failing)
    model, guide, svi = _setup(DropoutELBO())
    _warm(svi)
    assert "could not be checked (RuntimeError: no check today)" in _explain(svi)
    assert _stepped(svi, X, Y) == pytest.approx(_eager(model, guide, X, Y), rel=1e-5)
