"""Every step of every fast path is the eager step: two fits from the same seed, one with the loss
run eagerly, one on the path under test, compared after *every* step (the loss, and every parameter,
so every gradient: plain SGD), while the model's Python changes under it (a global, a closure
variable, a dict attribute, changed at arbitrary steps and changed back; the modules' mode), with
batch norm in training mode (its running statistics equal eager's), a shape made from the data, a
new batch size every step, and keyword tensors. On main 0a1ecd5 these trained up to 200 of 300 steps
on a stale graph with no warning, drifted batch norm's statistics by 0.016, and failed at step 35 on
the data-dependent shape.

Tolerance: 1e-5 relative for the losses, 1e-6 absolute for the parameters (float32 rounding of
the same operations); under ``torch.compile``, whose fused kernels round differently, 1e-4 for both
(a stale step differs by 1e-2 or more); seed 0 for the models and the masks, 1000 + step for the data.
"""

from __future__ import annotations

import sys

import pyro
import pyro.distributions as dist
import pytest
import torch
import torch.nn.functional as F
from pyro.infer import SVI
from pyro.nn import PyroModule

from pyro_dropout import BBAlpha, CompiledSVI, DropoutELBO, DropoutGuide
from pyro_dropout.infer.recorded.graph import RECORD_AT
from pyro_dropout.infer.recorded.routes import MAX_ROUTES
from pyro_dropout.nn import Linear

NOISE = 0.5  # a module-level constant the model reads, as a noise scale or an annealing factor
STEPS = 60
CHANGES = {RECORD_AT + 2, RECORD_AT + 3, 23, 24, 25, 41, 47}  # steps that read the other value


class Net(PyroModule):
    """A 2-8-1 regression whose noise scale comes from ``scale()``."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = Linear(2, 8), Linear(8, 1)

    def scale(self) -> float:
        return NOISE

    def hidden(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.fc1(x))

    def forward(self, x: torch.Tensor, y: torch.Tensor | None = None) -> torch.Tensor:
        mu = self.fc2(self.hidden(x)).squeeze(-1)
        with pyro.plate("data", x.shape[0]):
            return pyro.sample("obs", dist.Normal(mu, self.scale()), obs=y)


class DictNoise(Net):
    def __init__(self) -> None:
        super().__init__()
        self.cfg = {"noise": 0.5}

    def scale(self) -> float:
        return self.cfg["noise"]


def closure_net() -> tuple[Net, object]:
    noise = 0.5

    class ClosureNoise(Net):
        def scale(self) -> float:
            return noise

    def set_noise(value: float) -> None:
        nonlocal noise
        noise = value

    return ClosureNoise(), set_noise


class ModeNet(Net):
    """A functional dropout that reads the module's mode, as a network written for PyTorch does."""

    def hidden(self, x: torch.Tensor) -> torch.Tensor:
        return F.dropout(torch.relu(self.fc1(x)), 0.3, self.training)


class NormNet(Net):
    """Batch norm in training mode between the layers (its running statistics are buffers)."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = torch.nn.BatchNorm1d(8)

    def hidden(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.norm(self.fc1(x)))


class Selecting(Net):
    """Observes only the rows whose first input is positive: a shape made from the data."""

    def forward(self, x: torch.Tensor, y: torch.Tensor | None = None) -> torch.Tensor:
        keep = x[:, 0] > 0
        mu = self.fc2(self.hidden(x)).squeeze(-1)[keep]
        with pyro.plate("data", mu.shape[0]):
            return pyro.sample("obs", dist.Normal(mu, NOISE), obs=None if y is None else y[keep])


def _set_global(value: float) -> None:
    sys.modules[__name__].NOISE = value


PATHS = {
    "default": lambda m, g: SVI(m, g, pyro.optim.SGD({"lr": 1e-2}), DropoutELBO()),
    "bbalpha": lambda m, g: SVI(m, g, pyro.optim.SGD({"lr": 1e-2}), BBAlpha(0.5, num_particles=3)),
    "compiled-record": lambda m, g: CompiledSVI(
        m, g, pyro.optim.SGD({"lr": 1e-2}), DropoutELBO(), graph="record"
    ),
    "compile": lambda m, g: SVI(m, g, pyro.optim.SGD({"lr": 1e-2}), DropoutELBO(graph="compile")),
    "compiled-svi": lambda m, g: CompiledSVI(m, g, pyro.optim.SGD({"lr": 1e-2}), DropoutELBO()),
}
COMPILING = ("compile", "compiled-svi")  # torch.compile's first compile takes seconds: slow tests
EAGER = {
    "default": lambda m, g: SVI(m, g, pyro.optim.SGD({"lr": 1e-2}), DropoutELBO(graph="eager")),
    "bbalpha": lambda m, g: SVI(
        m, g, pyro.optim.SGD({"lr": 1e-2}), BBAlpha(0.5, num_particles=3, graph="eager")
    ),
    "compiled": lambda m, g: CompiledSVI(m, g, pyro.optim.SGD({"lr": 1e-2}), DropoutELBO(), graph="eager"),
}


def _data(t: int, rows: int = 16) -> tuple[tuple, dict]:
    g = torch.Generator().manual_seed(1000 + t)
    return (torch.randn(rows, 2, generator=g), torch.randn(rows, generator=g)), {}


def _fit(make_svi, build, change=None, data=_data, steps=STEPS):
    """Losses and the parameters (and buffers) after every step, and the SVI object."""
    pyro.clear_param_store()
    pyro.set_rng_seed(0)
    built = build()
    model, setter = built if isinstance(built, tuple) else (built, None)
    guide = DropoutGuide(model, dropout=0.1)
    svi = make_svi(model, guide)
    losses, states = [], []
    for t in range(steps):
        if change is not None:
            change(t, model, setter)
        args, kwargs = data(t)
        losses.append(svi.step(*args, **kwargs))
        state = {n: p.detach().clone() for n, p in pyro.get_param_store().named_parameters()}
        state |= {f"buffer {n}": b.clone() for n, b in model.named_buffers()}
        states.append(state)
    return losses, states, svi


def _assert_every_step_equal(path, build, change=None, data=_data, steps=STEPS):
    eager = EAGER["bbalpha" if path == "bbalpha" else "compiled" if "compiled" in path else "default"]
    want, want_states, _ = _fit(eager, build, change, data, steps)
    got, got_states, svi = _fit(PATHS[path], build, change, data, steps)
    rtol = 1e-4 if path in COMPILING else 1e-5
    atol = 1e-4 if path in COMPILING else 1e-6
    stale = [
        t for t, (a, b) in enumerate(zip(got, want, strict=True)) if abs(a - b) > rtol * max(1.0, abs(b))
    ]
    assert not stale, f"steps {stale} differ from eager: {[(got[t], want[t]) for t in stale[:3]]}"
    for t, (a, b) in enumerate(zip(got_states, want_states, strict=True)):
        assert a.keys() == b.keys()
        for name in b:
            assert torch.allclose(a[name].float(), b[name].float(), atol=atol, rtol=rtol), (t, name)
    return svi


def _explain(svi) -> str:
    return svi.explain() if isinstance(svi, CompiledSVI) else svi.loss_and_grads.__self__.explain()


def _noise(t: int) -> float:
    return 0.3 if t in CHANGES else 0.5


PATH_IDS = [pytest.param(p, marks=pytest.mark.slow) if p in COMPILING else p for p in PATHS]


@pytest.mark.parametrize("path", PATH_IDS)
def test_a_global_changed_and_changed_back_is_never_stale(path):
    svi = _assert_every_step_equal(path, Net, lambda t, m, s: _set_global(_noise(t)))
    _set_global(0.5)
    assert "recorded graph" in _explain(svi) or "compiled graph" in _explain(svi)  # the fast path ran


@pytest.mark.parametrize("path", PATH_IDS)
def test_a_closure_variable_changed_and_changed_back_is_never_stale(path):
    _assert_every_step_equal(path, closure_net, lambda t, m, set_noise: set_noise(_noise(t)))


@pytest.mark.parametrize("path", PATH_IDS)
def test_a_value_in_a_dict_attribute_changed_and_changed_back_is_never_stale(path):
    def change(t, model, _):
        model.cfg["noise"] = _noise(t)

    _assert_every_step_equal(path, DictNoise, change)


@pytest.mark.parametrize("path", PATH_IDS)
def test_eval_and_train_between_steps_are_never_stale(path):
    def change(t, model, _):
        model.train(t not in CHANGES)

    _assert_every_step_equal(path, ModeNet, change)


@pytest.mark.parametrize("path", PATH_IDS)
def test_batch_norm_in_training_mode_keeps_eagers_running_statistics(path):
    """After 100 steps the running mean, variance and count are eager's (each step updates them
    once: the recording's extra passes leave them as they were)."""
    _assert_every_step_equal(path, NormNet, steps=100)


@pytest.mark.parametrize("path", PATH_IDS)
def test_a_shape_made_from_the_data_trains_as_eagerly(path):
    svi = _assert_every_step_equal(path, Selecting)
    assert "shape" in _explain(svi) and "eager" in _explain(svi)


@pytest.mark.parametrize("path", ["default", "compiled-record"])
def test_a_new_batch_size_every_step_keeps_few_routes_and_records_nothing(path):
    """Each size is seen once: nothing is recorded (no recording's cost), the routes are bounded
    (their least recently used dropped, with one warning), every step is eager's."""

    def data(t):
        return _data(t, rows=3 + t)

    with pytest.warns(UserWarning, match=f"more than {MAX_ROUTES} call signatures"):
        svi = _assert_every_step_equal(path, Net, data=data, steps=MAX_ROUTES + 8)
    loss = svi if isinstance(svi, CompiledSVI) else svi.loss_and_grads.__self__
    recorded = (
        loss._graph_loss.recorded
        if isinstance(svi, CompiledSVI)
        else next(iter(loss.graph_losses.values())).recorded
    )
    routes = recorded.routes.by_key.values()
    assert len(routes) == MAX_ROUTES and all(r.records == 0 and not r.graphs for r in routes)


@pytest.mark.parametrize("path", PATH_IDS)
def test_keyword_tensors_are_part_of_the_signature(path):
    """``step(x=..., y=...)`` with two batch sizes taking turns: each size its own graph."""

    def data(t):
        (x, y), _ = _data(t, rows=7 if t % 2 else 3)
        return (), {"x": x, "y": y}

    svi = _assert_every_step_equal(path, Net, data=data)
    assert _explain(svi).count("graph, guarded") == 2
