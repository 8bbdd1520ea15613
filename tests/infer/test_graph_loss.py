"""``DropoutELBO(graph="record")`` / ``BBAlpha(..., graph="record")`` in plain ``SVI``: the same
training as the eager loss, one graph per input shape, and clear errors."""

import warnings

import pyro
import pytest
import torch
from pyro.infer import SVI

from pyro_dropout import BBAlpha, DropoutELBO, DropoutGuide
from pyro_dropout.infer.recorded.graph import WARM_UP
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


def _graphs(loss):
    (graph,) = loss.graph_losses.values()
    return graph.recorded.graphs


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
    (graph,) = _graphs(loss).values()
    targets = [str(n.target) for n in graph.graph.nodes if n.op == "call_function"]
    assert sum("bernoulli_keep" in t for t in targets) == 3  # one draw per layer, none merged
    assert not any("sym_size" in t for t in targets)  # a graph made per shape holds no sizes


def test_one_graph_per_input_shape():
    loss = DropoutELBO(graph="record")
    _fit(loss, steps=9, shapes=(16, 7, 16))
    (graph,) = loss.graph_losses.values()
    assert len(graph.recorded.graphs) == 2 and len(graph.names) > 0


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


@pyro.settings.context(module_local_params=True)
def test_parameters_outside_the_param_store_are_named():
    model = MLP(3, 1, hidden=(8,))
    guide = DropoutGuide(model, dropout=0.2)
    svi = SVI(model, guide, pyro.optim.Adam({"lr": 1e-2}), DropoutELBO(graph="record"))
    x = torch.randn(4, 3)
    with pytest.raises(ValueError, match=r"DropoutELBO: the parameters .* not in Pyro's param store"):
        svi.step(x, x.sum(-1))


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


def _fit_unused(loss, steps=WARM_UP + 8):
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
    assert not loss.graph_losses[next(iter(loss.graph_losses))].recorded.eager


@pytest.mark.parametrize("graph, warns", [("record", True), (None, False)])
def test_a_graph_that_draws_otherwise_is_refused_at_recording(monkeypatch, graph, warns):
    """A graph that moves the generator otherwise than the eager loss (a draw more, here) would
    draw every later mask apart from it: checked once, when the graph is made, the loss then runs
    eagerly, with a warning under graph="record" and without at the default."""
    from pyro_dropout.infer.recorded import graph as recorded_graph

    def record_with_a_draw_more(*args, **kwargs):
        run, why = record_loss(*args, **kwargs)

        def drawing(*inputs):
            torch.rand(())
            return run(*inputs)

        return drawing, why

    record_loss = recorded_graph.record_loss
    monkeypatch.setattr(recorded_graph, "record_loss", record_with_a_draw_more)
    loss = DropoutELBO(graph=graph)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        losses = _fit_unused(loss)
    assert losses == pytest.approx(_fit_unused(DropoutELBO(graph="eager")), rel=1e-6)
    (recorded,) = loss.graph_losses.values()
    assert "other random numbers" in recorded.recorded.eager and not recorded.recorded.graphs
    said = [w for w in caught if "other random numbers" in str(w.message)]
    assert bool(said) == warns


def test_a_warning_points_at_the_users_line():
    """The recorded loss's warnings name the line of the user's ``svi.step``, not the library's."""

    class Reads(MLP):
        def forward(self, x, y=None, num_data=None):
            return super().forward(x if float(x.mean()) < 1e30 else -x, y, num_data=num_data)

    pyro.clear_param_store()
    model = Reads(3, 1, hidden=(8,))
    svi = SVI(
        model, DropoutGuide(model, dropout=0.2), pyro.optim.Adam({"lr": 1e-2}), DropoutELBO(graph="record")
    )
    x = torch.randn(16, 3)
    svi.step(x, x.sum(-1))  # eager: finds the parameters
    with pytest.warns(UserWarning, match="reads a tensor's value") as caught:
        svi.step(x, x.sum(-1))
    assert [w.filename for w in caught if "reads a tensor" in str(w.message)] == [__file__]
