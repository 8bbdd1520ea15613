"""Traces that cannot lie: a loss that branches on its data runs eagerly with a warning naming
the line, a changed model attribute makes a new trace, and ``retrace()`` catches the rest
(:mod:`pyro_dropout.infer.fast.frozen`). Each case here gave a wrong loss before: 40.8 against
the eager 28.8 for the branch, 266.8 against 23.3 for the attribute."""

import warnings

import pyro
import pyro.distributions as dist
import pytest
import torch
from pyro.infer import SVI
from pyro.nn import PyroModule

from pyro_dropout import BBAlpha, CompiledSVI, DropoutELBO, DropoutGuide
from pyro_dropout.infer import StaleTraceError
from pyro_dropout.infer.fast.spot_check import CHECK_EVERY
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
    svi = (CompiledSVI if compiled else SVI)(model, guide, pyro.optim.Adam({"lr": 0.0}), loss)
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
    "elbo-jit": (lambda: DropoutELBO(jit=True), False),
    "bbalpha-jit": (lambda: BBAlpha(0.5, jit=True), False),
    "compiled-svi": (lambda: DropoutELBO(), True),
}
X = torch.linspace(0.1, 2.0, 32).unsqueeze(-1)
Y = torch.zeros(32)


@pytest.mark.parametrize("name", LOSSES)
def test_a_loss_that_branches_on_its_data_runs_eagerly_and_names_the_line(name):
    make, compiled = LOSSES[name]
    model, guide, svi = _setup(make(), compiled=compiled)
    named = r"reads a tensor's value in Python at .*test_frozen\.py:\d+ \(if self\.branch"
    with pytest.warns(UserWarning, match=named):
        for _ in range(3):
            svi.step(X, Y)
    # the other branch, as the eager loss takes it (the trace would have kept the first: ~1600)
    eager = _eager(model, guide, -X, Y)
    assert eager < 500
    if name != "bbalpha-jit":  # the same objective: the same number under the same seed
        assert _stepped(svi, -X, Y) == pytest.approx(eager, rel=1e-5)
    else:
        assert _stepped(svi, -X, Y) < 500


@pytest.mark.parametrize("name", ["elbo-jit", "compiled-svi"])
def test_a_changed_model_attribute_makes_a_new_trace(name):
    make, compiled = LOSSES[name]
    model, guide, svi = _setup(make(), branch=False, compiled=compiled)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # branch-free: traced, without a word
        for _ in range(3):
            svi.step(X, Y)
        model.noise = 0.1
        assert _stepped(svi, X, Y) == pytest.approx(_eager(model, guide, X, Y), rel=1e-4)


def test_an_attribute_changed_at_every_step_ends_in_the_eager_loss_with_a_warning():
    model, guide, svi = _setup(DropoutELBO(jit=True), branch=False)
    svi.step(X, Y)
    with pytest.warns(UserWarning, match=r"model\.noise changed at 5 of \d+ calls"):
        for step in range(8):
            model.noise = 1.0 + step
            svi.step(X, Y)
    assert _stepped(svi, X, Y) == pytest.approx(_eager(model, guide, X, Y), rel=1e-5)


@pytest.mark.parametrize("name", ["elbo-jit", "compiled-svi"])
def test_a_global_change_is_refused_by_a_spot_check_and_seen_after_retrace(name):
    """A global is frozen in the trace unseen; the next spot check (at most CHECK_EVERY traced
    steps later) finds the trace and the eager loss apart and refuses; retrace() makes it right."""
    make, compiled = LOSSES[name]
    loss = make()
    model, guide, svi = _setup(loss, branch=False, compiled=compiled)
    try:
        for _ in range(3):
            svi.step(X, Y)
        SHIFT["value"] = 5.0
        before = {k: v.detach().clone() for k, v in pyro.get_param_store().items()}
        stale = r"traced loss gave .* eagerly on the same draws.*retrace\(\)"
        with pytest.raises(StaleTraceError, match=stale):
            for _ in range(CHECK_EVERY):
                before = {k: v.detach().clone() for k, v in pyro.get_param_store().items()}
                svi.step(X, Y)
        after = dict(pyro.get_param_store().items())
        # the refused step updated nothing
        assert all(torch.equal(before[k], after[k].detach()) for k in before)
        (svi if compiled else loss).retrace()
        fresh = _stepped(svi, X, Y)
        eager = _eager(model, guide, X, Y)
    finally:
        SHIFT["value"] = 0.0
    assert fresh == pytest.approx(eager, rel=1e-4)


@pytest.mark.parametrize(
    "make",
    [lambda: DropoutELBO(jit=True), lambda: BBAlpha(0.5, num_particles=4, jit=True)],
    ids=["elbo", "bbalpha"],
)
def test_comparisons_of_shapes_do_not_count_as_reading_values(make):
    """A new batch size (a DataLoader's last batch) traces again; the checks made once per input
    shape (the particles' batching self-check reads values) run before recording, not in it."""
    pyro.clear_param_store()
    model = MLP(3, 1, hidden=(8,))
    svi = SVI(model, DropoutGuide(model), pyro.optim.Adam({"lr": 1e-2}), make())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for n in (16, 7, 16):
            x = torch.randn(n, 3)
            svi.step(x, x.sum(-1))
    (jit,) = svi.loss_and_grads.__self__.jit_losses.values()
    assert not jit.traced.eager and len(jit.traced.traces) == 2


def test_the_state_watch_gives_python_states_answer_after_every_kind_of_change():
    """StateWatch recomputes the modules' state only when something moved; after each change a
    trace must see, it agrees with python_state (and between changes it returns the same state)."""
    from pyro_dropout.infer.fast.frozen import StateWatch, python_state

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

    from pyro_dropout.infer.fast.frozen import StateWatch, python_state

    model = MLP(3, 1, hidden=(4,))
    blocked = poutine.block(model, hide=["nothing"])
    watch = StateWatch(blocked)
    before = watch()
    assert before == python_state(model) and before
    model.noise = 0.5
    assert watch() == python_state(blocked) != before
