"""``DropoutELBO(jit=True)`` / ``BBAlpha(..., jit=True)`` in plain ``SVI``: the same training as
the eager loss, one trace per input shape, and clear errors."""

import warnings

import pyro
import pytest
import torch
from pyro.infer import SVI

from pyro_dropout import BBAlpha, DropoutELBO, DropoutGuide
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


@pytest.mark.parametrize(
    "make",
    [
        lambda jit: DropoutELBO(jit=jit),
        lambda jit: DropoutELBO(num_particles=3, jit=jit),
        lambda jit: BBAlpha(0.5, num_particles=3, jit=jit),
    ],
    ids=["elbo", "elbo-3-particles", "bbalpha"],
)
@pytest.mark.parametrize("concrete", [False, True])
def test_the_traced_loss_trains_as_the_eager_one(make, concrete):
    eager_losses, eager = _fit(make(False), concrete=concrete)
    jit_losses, jitted = _fit(make(True), concrete=concrete)
    # the same draws in the same order: equal up to float reassociation in the trace
    assert jit_losses == pytest.approx(eager_losses, rel=1e-4)
    assert eager.keys() == jitted.keys()
    for name in eager:
        assert torch.allclose(eager[name], jitted[name], atol=1e-5), name


def test_masks_of_one_size_stay_independent_in_the_simplified_trace():
    # two layers of 8 inputs draw two masks of one shape: the trace's clean-up passes (constant
    # folding, common subexpressions) must keep them two draws, as the eager loss makes them
    eager_losses, eager = _fit(DropoutELBO(), hidden=(8, 8))
    loss = DropoutELBO(jit=True)
    jit_losses, jitted = _fit(loss, hidden=(8, 8))
    assert jit_losses == pytest.approx(eager_losses, rel=1e-4)
    for name in eager:
        assert torch.allclose(eager[name], jitted[name], atol=1e-5), name
    (jit,) = loss.jit_losses.values()
    (trace,) = jit.traced.traces.values()
    graph = trace.keep[1].forward.graph
    kinds = [node.kind() for node in graph.nodes()]
    assert kinds.count("aten::random_") == 3  # one draw per layer, none merged
    assert "aten::size" not in kinds  # the sizes of a trace made per shape are folded
    views = [n for n in graph.nodes() if n.kind() in ("aten::expand", "aten::reshape", "aten::view")]
    assert all(n.inputsAt(0).type().varyingSizes() != n.output().type().varyingSizes() for n in views)


def test_one_trace_per_input_shape():
    loss = DropoutELBO(jit=True)
    _fit(loss, steps=9, shapes=(16, 7, 16))
    (jit,) = loss.jit_losses.values()
    assert len(jit.traced.traces) == 2 and len(jit.names) > 0


def test_a_cleared_param_store_starts_again_eagerly():
    loss = DropoutELBO(jit=True)
    _fit(loss, steps=3)
    losses, _ = _fit(loss, steps=3)  # new model and guide, a fresh store
    assert len(loss.jit_losses) == 2 and all(v == v for v in losses)


def test_bad_inputs_are_still_named_on_the_traced_path():
    loss = DropoutELBO(jit=True)
    _fit(loss, steps=2)
    (jit,) = loss.jit_losses.values()
    x = torch.randn(16, 3)
    x[2, 1] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        SVI(jit.model, jit.guide, pyro.optim.Adam({"lr": 1e-2}), loss).step(x, x.sum(-1), num_data=100)


@pyro.settings.context(module_local_params=True)
def test_parameters_outside_the_param_store_are_named():
    model = MLP(3, 1, hidden=(8,))
    guide = DropoutGuide(model, dropout=0.2)
    svi = SVI(model, guide, pyro.optim.Adam({"lr": 1e-2}), DropoutELBO(jit=True))
    x = torch.randn(4, 3)
    with pytest.raises(
        ValueError, match=r"DropoutELBO\(jit=True\): the parameters .* not in Pyro's param store"
    ):
        svi.step(x, x.sum(-1))


def test_a_trace_whose_clean_up_fails_is_used_as_recorded(monkeypatch):
    from pyro_dropout.infer.fast import recording

    def missing(graph):
        raise AttributeError("this PyTorch has no such pass")

    eager_losses, _ = _fit(DropoutELBO(), steps=6)
    monkeypatch.setattr(recording, "simplify", missing)
    loss = DropoutELBO(jit=True)
    jit_losses, _ = _fit(loss, steps=6)
    assert jit_losses == pytest.approx(eager_losses, rel=1e-4)
    (jit,) = loss.jit_losses.values()
    (trace,) = jit.traced.traces.values()
    assert "aten::size" in [n.kind() for n in trace.keep[1].forward.graph.nodes()]  # not folded


def test_a_loss_with_an_unused_draw_runs_eagerly():
    """The tracer drops a draw whose value is unused, so the trace would draw every later mask
    apart from the eager loss (and the spot checks would refuse it). Checked once, when the trace
    is made: the loss then runs eagerly, with a warning under jit=True and without at the default."""

    class Unused(MLP):
        def forward(self, x, y=None):
            torch.empty(4, dtype=torch.int64).random_()  # drawn, never used
            return super().forward(x, y)

    for jit, warns in ((True, True), ("auto", False)):
        pyro.clear_param_store()
        model = Unused(3, 1, hidden=(8,))
        loss = DropoutELBO(jit=jit)
        svi = SVI(model, DropoutGuide(model, dropout=0.2), pyro.optim.Adam({"lr": 1e-2}), loss)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(40):
                svi.step(torch.randn(16, 3), torch.randn(16))
        (traced,) = loss.jit_losses.values()
        assert "other random numbers" in traced.traced.eager and not traced.traced.traces
        said = [w for w in caught if "other random numbers" in str(w.message)]
        assert bool(said) == warns
