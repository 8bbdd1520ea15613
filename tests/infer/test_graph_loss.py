"""``DropoutELBO(graph="record")`` / ``BBAlpha(..., graph="record")`` in plain ``SVI``: the same
training as the eager loss, one route per input shape, and clear errors."""

import warnings

import pyro
import pytest
import torch
from pyro.infer import SVI

from pyro_dropout import BBAlpha, DropoutELBO, DropoutGuide
from pyro_dropout.infer.recorded.graph import RECORD_AT
from pyro_dropout.nn import MLP


def _fit(loss, steps=30, shapes=(16,), concrete=False, hidden=(8,)):
    pyro.set_rng_seed(0)
    pyro.clear_param_store()
    g = torch.Generator().manual_seed(1)
    model = MLP(3, 1, hidden=hidden)
    guide = DropoutGuide(model, concrete=True) if concrete else DropoutGuide(model, dropout=0.2)
    svi = SVI(model, guide, pyro.optim.Adam({"lr": 1e-2}), loss)
    losses = []
    for step in range(steps):
        n = shapes[step % len(shapes)]
        x = torch.randn(n, 3, generator=g)
        losses.append(svi.step(x, x.sum(-1), num_data=100))
    params = {k: v.detach().clone() for k, v in pyro.get_param_store().items()}
    return losses, params


def _routes(loss):
    (graph,) = loss.graph_losses.values()
    return list(graph.recorded.routes.by_key.values())


def _graphs(loss):
    return [g for route in _routes(loss) for g, _ in route.graphs.values()]


@pytest.mark.parametrize(
    "make",
    [
        lambda graph: DropoutELBO(graph=graph),
        lambda graph: DropoutELBO(num_particles=3, graph=graph),
        lambda graph: BBAlpha(0.5, num_particles=3, graph=graph),
    ],
    ids=["elbo", "elbo-3-particles", "bbalpha"],
)
@pytest.mark.parametrize("concrete", [False, True])
def test_the_recorded_loss_trains_as_the_eager_one(make, concrete):
    eager_losses, eager = _fit(make("eager"), concrete=concrete)
    loss = make("record")
    graph_losses, recorded = _fit(loss, concrete=concrete)
    assert len(_graphs(loss)) == 1  # every step after the first ran the graph
    # the same draws in the same order: equal up to float reassociation in the graph
    assert graph_losses == pytest.approx(eager_losses, rel=1e-4)
    assert eager.keys() == recorded.keys()
    for name in eager:
        assert torch.allclose(eager[name], recorded[name], atol=1e-5), name


def test_masks_of_one_size_stay_independent_in_the_graph():
    # two layers of 8 inputs draw two masks of one shape: folding the graph's constants must keep
    # them two draws, as the eager loss makes them
    eager_losses, eager = _fit(DropoutELBO(graph="eager"), hidden=(8, 8))
    loss = DropoutELBO(graph="record")
    graph_losses, recorded = _fit(loss, hidden=(8, 8))
    assert graph_losses == pytest.approx(eager_losses, rel=1e-4)
    for name in eager:
        assert torch.allclose(eager[name], recorded[name], atol=1e-5), name
    (graph,) = _graphs(loss)
    targets = [str(n.target) for n in graph.graph.nodes if n.op == "call_function"]
    assert sum("bernoulli_keep" in t for t in targets) == 3  # one draw per layer, none merged
    assert not any("sym_size" in t for t in targets)  # a graph made per shape holds no sizes


def test_one_graph_per_input_shape():
    loss = DropoutELBO(graph="record")
    _fit(loss, steps=3 * RECORD_AT + 1, shapes=(16, 7, 16))
    (graph,) = loss.graph_losses.values()
    assert len(_graphs(loss)) == 2 and len(graph.names) > 0


def test_a_cleared_param_store_starts_again_eagerly():
    loss = DropoutELBO(graph="record")
    _fit(loss, steps=3)
    losses, _ = _fit(loss, steps=3)  # new model and guide, a fresh store
    assert len(loss.graph_losses) == 2 and all(v == v for v in losses)


def test_bad_inputs_are_still_named_on_the_recorded_path():
    loss = DropoutELBO(graph="record")
    _fit(loss, steps=2)
    (graph,) = loss.graph_losses.values()
    x = torch.randn(16, 3)
    x[2, 1] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        SVI(graph.model, graph.guide, pyro.optim.Adam({"lr": 1e-2}), loss).step(x, x.sum(-1), num_data=100)


@pytest.mark.parametrize("old", ["jit", "jit_compile"])
def test_the_old_switches_are_named(old):
    with pytest.raises(TypeError, match=f"{old}= was replaced by graph="):
        DropoutELBO(**{old: True})
    with pytest.raises(TypeError, match=f"{old}= was replaced by graph="):
        BBAlpha(0.5, **{old: True})


class Unused(MLP):
    def forward(self, x, y=None):
        torch.empty(4, dtype=torch.int64).random_()  # drawn, never used
        return super().forward(x, y)


def _fit_unused(loss, steps=RECORD_AT + 8):
    pyro.set_rng_seed(0)
    pyro.clear_param_store()
    g = torch.Generator().manual_seed(1)
    model = Unused(3, 1, hidden=(8,))
    svi = SVI(model, DropoutGuide(model, dropout=0.2), pyro.optim.Adam({"lr": 1e-2}), loss)
    return [svi.step(torch.randn(16, 3, generator=g), torch.randn(16, generator=g)) for _ in range(steps)]


def test_a_draw_whose_value_is_unused_stays_in_the_graph():
    """An in-place draw is kept by the recorder, so every later mask is the eager loss's."""
    loss = DropoutELBO(graph="record")
    assert _fit_unused(loss) == pytest.approx(_fit_unused(DropoutELBO(graph="eager")), rel=1e-4)
    assert [r.eager for r in _routes(loss)] == [""] and len(_graphs(loss)) == 1


def test_a_graph_that_draws_otherwise_is_refused_at_recording(monkeypatch):
    """A graph that moves the generator otherwise than the eager loss (a draw more, here) would
    draw every later mask apart from it: checked once, when the graph is made, the loss then runs
    eagerly, and ``explain()`` says why."""
    from pyro_dropout.infer.recorded import routes

    def record_with_a_draw_more(*args, **kwargs):
        run, why = record_loss(*args, **kwargs)

        def drawing(*inputs):
            torch.rand(())
            return run(*inputs)

        return drawing, why

    record_loss = routes.record_loss
    monkeypatch.setattr(routes, "record_loss", record_with_a_draw_more)
    loss = DropoutELBO()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        losses = _fit_unused(loss)
    assert losses == pytest.approx(_fit_unused(DropoutELBO(graph="eager")), rel=1e-6)
    (route,) = _routes(loss)
    assert "other random numbers" in route.eager and not route.graphs
    assert "other random numbers" in loss.explain()


def test_explain_points_at_the_users_line():
    """Why a loss runs eagerly names the line of the user's code that read a value."""

    class Reads(MLP):
        def forward(self, x, y=None, num_data=None):
            return super().forward(x if float(x.mean()) < 1e30 else -x, y, num_data=num_data)

    pyro.clear_param_store()
    model = Reads(3, 1, hidden=(8,))
    loss = DropoutELBO(graph="record")
    svi = SVI(model, DropoutGuide(model, dropout=0.2), pyro.optim.Adam({"lr": 1e-2}), loss)
    x = torch.randn(16, 3)
    for _ in range(RECORD_AT + 1):
        svi.step(x, x.sum(-1))
    assert f"{__file__}:" in loss.explain() and "float(x.mean()) < 1e30" in loss.explain()
