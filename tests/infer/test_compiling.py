"""``graph="compile"``: the loss recorded and compiled by ``torch.compile`` trains as the eager loss
(same draws, same updates), falls back to the recorded graph with a warning where it cannot
compile, and keeps the input checks. (Every step under changing Python values:
``test_exact_steps.py``.)"""

import warnings

import pyro
import pytest
import torch
from pyro.infer import SVI

from pyro_dropout import BBAlpha, DropoutELBO, DropoutGuide
from pyro_dropout.infer import CompiledSVI, GraphLoss
from pyro_dropout.infer.recorded.graph import RECORD_AT
from pyro_dropout.nn import MLP


def _fit(loss, steps=12, model=None, svi_class=SVI):
    pyro.set_rng_seed(0)
    pyro.clear_param_store()
    g = torch.Generator().manual_seed(1)
    model = model or MLP(3, 1, hidden=(8,))
    guide = DropoutGuide(model, dropout=0.2)
    svi = svi_class(model, guide, pyro.optim.Adam({"lr": 1e-2}), loss)
    losses = []
    for _ in range(steps):
        x = torch.randn(16, 3, generator=g)
        losses.append(svi.step(x, x.sum(-1), num_data=100))
    params = {k: v.detach().clone() for k, v in pyro.get_param_store().items()}
    return losses, params


def _routes(graph_loss):
    return list(graph_loss.recorded.routes.by_key.values())


def _graphs(graph_loss):
    return sum(len(r.graphs) for r in _routes(graph_loss))


def _until_recorded(graph_loss, args, kwargs):
    """Call a GraphLoss until its signature is recorded (its first call finds the parameters)."""
    for _ in range(RECORD_AT + 1):
        graph_loss(args, kwargs)


def _loss_and_grads(loss_fn, params):
    pyro.set_rng_seed(7)
    value = loss_fn()
    value.backward()
    grads = [p.grad.clone() for p in params]
    for p in params:
        p.grad = None
    return value.item(), grads


@pytest.mark.slow
@pytest.mark.parametrize(
    "make, concrete",
    [
        (lambda: DropoutELBO(), False),
        (lambda: BBAlpha(0.5, num_particles=3), False),
        (lambda: DropoutELBO(num_particles=2), True),
    ],
    ids=["elbo", "bbalpha", "elbo-concrete"],
)
def test_the_compiled_loss_gives_the_eager_loss_and_gradients(make, concrete):
    # one loss and its gradients at the same parameters and seed (the same masks), to 1e-4: the
    # fused kernels round differently, which training amplifies (Adam's first steps are about
    # lr * sign(gradient)), so whole trajectories are not compared
    pyro.clear_param_store()
    model = MLP(3, 1, hidden=(8,))
    guide = DropoutGuide(model, concrete=True) if concrete else DropoutGuide(model, dropout=0.2)
    x = torch.randn(16, 3, generator=torch.Generator().manual_seed(2))
    args, kwargs = (x, x.sum(-1)), {"num_data": 100}
    compiled = GraphLoss(make(), model, guide, "compile")
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*without compiling")  # no fallback to the graph
        _until_recorded(compiled, args, kwargs)  # records and compiles
    assert _routes(compiled)[0].compiled and _graphs(compiled) == 1
    params = [pyro.param(name).unconstrained() for name in compiled.names]
    eager = make()
    eager.differentiable_loss(model, guide, *args, **kwargs)  # its first call guesses the plate nesting
    eager_value, eager_grads = _loss_and_grads(
        lambda: eager.differentiable_loss(model, guide, *args, **kwargs), params
    )
    value, grads = _loss_and_grads(lambda: compiled(args, kwargs), params)
    assert value == pytest.approx(eager_value, rel=1e-4)
    for name, a, b in zip(compiled.names, eager_grads, grads, strict=True):
        assert torch.allclose(a, b, rtol=1e-4, atol=1e-4 * a.abs().max().item()), name


@pytest.mark.slow
@pytest.mark.filterwarnings("default")
def test_a_frozen_parameter_gets_its_own_graph():
    # the graph holds the gradient of the parameters that required it when it was recorded: one
    # frozen later (or unfrozen) needs another graph, not a stale gradient
    pyro.clear_param_store()
    model = MLP(3, 1, hidden=(8,))
    guide = DropoutGuide(model, dropout=0.2)
    x = torch.randn(16, 3, generator=torch.Generator().manual_seed(2))
    args, kwargs = (x, x.sum(-1)), {"num_data": 100}
    compiled = GraphLoss(DropoutELBO(), model, guide, "compile")
    _until_recorded(compiled, args, kwargs)
    params = [pyro.param(name).unconstrained() for name in compiled.names]
    eager = DropoutELBO()
    eager.differentiable_loss(model, guide, *args, **kwargs)
    warnings.filterwarnings("error", message=".*without compiling")  # each pattern compiles
    for frozen in (params[0], None):
        for p in params:
            p.requires_grad_(p is not frozen)
        live = [p for p in params if p is not frozen]
        for _ in range(RECORD_AT):  # this pattern's signature recorded (and compiled)
            compiled(args, kwargs)
        for p in live:
            p.grad = None
        _, eager_grads = _loss_and_grads(
            lambda: eager.differentiable_loss(model, guide, *args, **kwargs), live
        )
        _, grads = _loss_and_grads(lambda: compiled(args, kwargs), live)
        assert frozen is None or frozen.grad is None
        for a, b in zip(eager_grads, grads, strict=True):
            assert torch.allclose(a, b, rtol=1e-4, atol=1e-4 * a.abs().max().item())
    # the first signature compiled; the frozen pattern, a later one, recorded until COMPILE_AFTER calls
    assert sorted(r.compiled for r in _routes(compiled)) == [False, True] and _graphs(compiled) == 2


@pytest.mark.slow
@pytest.mark.parametrize(
    "svi_class, compiled_class",
    [(SVI, SVI), (CompiledSVI, lambda *a: CompiledSVI(*a, graph="compile"))],
    ids=["SVI", "CompiledSVI"],
)
def test_compiled_training_tracks_the_eager_one(svi_class, compiled_class):
    loss = DropoutELBO(graph="compile") if svi_class is SVI else DropoutELBO()
    reference_svi = svi_class if svi_class is SVI else lambda *a: CompiledSVI(*a, graph="eager")
    reference, _ = _fit(DropoutELBO(graph="eager"), steps=150, svi_class=reference_svi)
    compiled, _ = _fit(loss, steps=150, svi_class=compiled_class)
    # the first compiled step draws the masks the reference draws at the same parameters
    assert compiled[:2] == pytest.approx(reference[:2], rel=1e-4)
    # then rounding differences grow (see above): the fit reaches the same level, to 10%
    end, reference_end = sum(compiled[-30:]) / 30, sum(reference[-30:]) / 30
    assert end == pytest.approx(reference_end, rel=0.1)
    assert end < 0.7 * sum(compiled[:10]) / 10  # and it did learn


class ReadsAValue(MLP):
    """A model whose Python reads a tensor's value: a graph would freeze what it read."""

    def forward(self, x, y=None, num_data=None):
        if float(x.abs().max()) > 1e30:
            raise AssertionError("unreachable")
        return super().forward(x, y, num_data=num_data)


def test_a_loss_that_reads_a_value_runs_eagerly_and_says_where():
    eager, eager_params = _fit(DropoutELBO(graph="eager"), model=ReadsAValue(3, 1, hidden=(8,)))
    loss = DropoutELBO(graph="compile")
    steps, params = _fit(loss, model=ReadsAValue(3, 1, hidden=(8,)))
    assert steps == pytest.approx(eager, rel=1e-6)  # the eager loss itself
    for name in eager_params:
        assert torch.allclose(params[name], eager_params[name], atol=1e-6), name
    (graph,) = loss.graph_losses.values()
    assert _routes(graph)[0].eager and not _graphs(graph)
    assert "reads a tensor's value" in loss.explain() and "test_compiling.py" in loss.explain()


def test_where_it_cannot_compile_it_warns_and_runs_the_recorded_graph(monkeypatch):
    def no_compiler(graph, **options):
        def run(*tensors):
            raise RuntimeError("no C++ compiler found")

        return run

    monkeypatch.setattr(torch, "compile", no_compiler)  # a machine without a compiler
    eager, eager_params = _fit(DropoutELBO(graph="eager"))
    loss = DropoutELBO(graph="compile")
    failed = r"graph='compile'\): torch.compile failed \(RuntimeError: no C\+\+ compiler.*without compiling"
    with pytest.warns(UserWarning, match=failed):
        recorded, params = _fit(loss)
    assert recorded == pytest.approx(eager, rel=1e-4)  # the graph runs the eager ops: the same training
    for name in eager_params:
        assert torch.allclose(params[name], eager_params[name], atol=1e-5), name
    (graph,) = loss.graph_losses.values()
    assert _graphs(graph) == 1 and not _routes(graph)[0].eager


def test_inputs_are_still_checked():
    pyro.clear_param_store()
    model = MLP(3, 1, hidden=(8,))
    svi = SVI(model, DropoutGuide(model), pyro.optim.Adam({"lr": 1e-2}), DropoutELBO(graph="compile"))
    x = torch.randn(16, 3)
    svi.step(x, x.sum(-1), num_data=100)  # eager: finds the parameters
    x[3, 1] = float("nan")
    with pytest.raises(ValueError, match=r"model argument 0 \(shape \(16, 3\)\) contains NaN"):
        svi.step(x, x.sum(-1), num_data=100)


@pytest.mark.parametrize("make", [lambda: DropoutELBO(graph="fast"), lambda: BBAlpha(0.5, graph=2)])
def test_an_unknown_graph_mode_is_an_error(make):
    with pytest.raises(ValueError, match="graph must be 'eager', 'record' or 'compile'"):
        make()


def test_compiled_svi_rejects_an_unknown_mode_and_the_old_switch():
    model = MLP(3, 1, hidden=(8,))
    args = (model, DropoutGuide(model), pyro.optim.Adam({"lr": 1e-2}), DropoutELBO())
    with pytest.raises(ValueError, match="CompiledSVI: graph must be"):
        CompiledSVI(*args, graph="x")
    with pytest.raises(TypeError, match="CompiledSVI: jit_compile= was replaced by graph="):
        CompiledSVI(*args, jit_compile=True)


def _compile_counter(monkeypatch):
    """Replace the compiler by the plain recording, counting the input shapes it is asked to compile."""
    from pyro_dropout.infer.recorded import graph as graph_module
    from pyro_dropout.infer.recorded import routes

    asked: list[tuple[int, ...]] = []
    record = routes.record_loss

    def count(fn, args, kwargs, params, compile, detaches=False):
        if compile:
            asked.append(tuple(args[0].shape))
        return record(fn, args, kwargs, params, False, detaches)

    monkeypatch.setattr(routes, "record_loss", count)
    monkeypatch.setattr(graph_module, "COMPILE_AFTER", RECORD_AT + 3)
    return asked


def test_a_later_batch_size_runs_its_graph_until_it_has_been_called_often(monkeypatch):
    # the first input shape compiles when it is recorded; the short batch runs its recorded graph
    # (no wait for the compiler) and compiles only after COMPILE_AFTER calls
    asked = _compile_counter(monkeypatch)
    pyro.set_rng_seed(0)
    pyro.clear_param_store()
    model = MLP(3, 1, hidden=(8,))
    loss = DropoutELBO(graph="compile")
    svi = SVI(model, DropoutGuide(model, dropout=0.2), pyro.optim.Adam({"lr": 1e-2}), loss)
    x16, x5 = torch.randn(16, 3), torch.randn(5, 3)
    for _ in range(RECORD_AT + 1):  # the first step finds the parameters, eagerly
        svi.step(x16, x16.sum(-1), num_data=100)
    assert asked == [(16, 3)]
    for calls in range(1, RECORD_AT + 5):
        svi.step(x5, x5.sum(-1), num_data=100)
        assert asked == [(16, 3)] + [(5, 3)] * (calls > RECORD_AT + 3), calls
    (graph,) = loss.graph_losses.values()
    routes = _routes(graph)
    assert [len(r.graphs) for r in routes] == [1, 1] and [r.compiled for r in routes] == [True, True]


@pytest.mark.slow
def test_a_later_batch_size_runs_its_recorded_graph_and_gives_the_eager_loss():
    pyro.clear_param_store()
    model = MLP(3, 1, hidden=(8,))
    guide = DropoutGuide(model, dropout=0.2)
    x16, x5 = torch.randn(16, 3), torch.randn(5, 3)
    compiled = GraphLoss(DropoutELBO(), model, guide, "compile")
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*without compiling")  # no fallback to the graph
        _until_recorded(compiled, (x16, x16.sum(-1)), {"num_data": 100})  # records and compiles
        for _ in range(RECORD_AT):
            compiled((x5, x5.sum(-1)), {"num_data": 100})  # recorded, not compiled
    assert _graphs(compiled) == 2 and [r.compiled for r in _routes(compiled)] == [True, False]
    eager = DropoutELBO(graph="eager")
    eager.differentiable_loss(model, guide, x5, x5.sum(-1), num_data=100)  # guesses the plate nesting
    pyro.set_rng_seed(3)
    expected = eager.differentiable_loss(model, guide, x5, x5.sum(-1), num_data=100).item()
    pyro.set_rng_seed(3)
    assert compiled((x5, x5.sum(-1)), {"num_data": 100}).item() == pytest.approx(expected, rel=1e-6)
