"""Prediction chunks replayed from a trace: the same draws as the eager pass, and the eager pass
wherever a trace would be unsafe."""

import gc
import weakref

import pyro
import pyro.distributions as dist
import pytest
import torch

import pyro_dropout.prediction.engine as engine_module
import pyro_dropout.prediction.replay as traced_chunks
from pyro_dropout import DropoutGuide, predict
from pyro_dropout.nn import MLP
from pyro_dropout.nn.functional import linear
from pyro_dropout.prediction.predictive import predict_chunks
from pyro_dropout.prediction.replay import TracedChunk

from .models import data, raw_regression

CHUNKS = engine_module.MIN_TRACED_CHUNKS + 6  # enough chunks of one size to trace


@pytest.fixture
def traces_made(monkeypatch):
    """What each call of ``trace_chunk`` returned: a TracedChunk or None."""
    made = []
    original = engine_module.trace_chunk

    def spy(*args):
        result = original(*args)
        made.append(None if result is None else result[0])
        return result

    monkeypatch.setattr(engine_module, "trace_chunk", spy)
    return made


def _mlp(likelihood="normal", seed=0):
    pyro.clear_param_store()
    torch.manual_seed(seed)
    out = 3 if likelihood == "categorical" else 1
    model = MLP(4, out, hidden=(8,), likelihood=likelihood, tau="learned" if likelihood == "normal" else 1.0)
    guide = DropoutGuide(model, dropout=0.2)
    x = torch.randn(10, 4)
    y = torch.randint(0, 3, (10,)) if likelihood == "categorical" else torch.randn(10)
    guide(x, y)
    return model, guide, x, y


def _both(model, guide, *args, **kwargs):
    torch.manual_seed(7)
    traced = predict(model, guide, *args, jit=True, **kwargs)
    after_traced = torch.rand(())
    torch.manual_seed(7)
    eager = predict(model, guide, *args, jit=False, **kwargs)
    return traced, eager, after_traced, torch.rand(())


def _assert_same(a, b):
    for group in ("samples", "means", "variances", "probs", "log_likelihood"):
        ga, gb = getattr(a, group), getattr(b, group)
        assert ga.keys() == gb.keys(), group
        for name in ga:
            torch.testing.assert_close(ga[name], gb[name], rtol=1e-5, atol=1e-6, msg=f"{group} {name}")
    assert a.kinds == b.kinds and a.distributions == b.distributions


@pytest.mark.parametrize("likelihood", ["normal", "categorical"])
def test_traced_chunks_give_the_eager_draws(likelihood, traces_made):
    model, guide, x, y = _mlp(likelihood)
    traced, eager, after_traced, after_eager = _both(
        model, guide, x, y, num_samples=2 * CHUNKS + 1, chunk_size=2
    )
    assert len(traces_made) == 1 and isinstance(traces_made[0], TracedChunk)
    _assert_same(traced, eager)
    assert traced.num_samples == 2 * CHUNKS + 1  # the last, smaller chunk ran eagerly
    assert torch.equal(after_traced, after_eager)  # the random stream moved on alike


def test_the_traced_outputs_need_no_gradients(traces_made):
    model, guide, x, y = _mlp()
    pred = predict(model, guide, x, y, num_samples=CHUNKS, chunk_size=1)
    assert isinstance(traces_made[0], TracedChunk)
    assert not any(v.requires_grad for group in (pred.samples, pred.means) for v in group.values())


def test_streamed_chunks_replay_the_trace_too(traces_made):
    model, guide, x, y = _mlp()
    torch.manual_seed(3)
    chunks = list(predict_chunks(model, guide, x, y, num_samples=CHUNKS, chunk_size=1))
    torch.manual_seed(3)
    whole = predict(model, guide, x, y, num_samples=CHUNKS, chunk_size=1, jit=False)
    assert isinstance(traces_made[0], TracedChunk)
    streamed = torch.cat([c.log_likelihood["obs"] for c in chunks])
    torch.testing.assert_close(streamed, whole.log_likelihood["obs"])
    assert all(c.kinds == whole.kinds and "obs" in c.observed for c in chunks)


def test_few_chunks_are_not_traced(traces_made):
    model, guide, x, y = _mlp()
    predict(model, guide, x, y, num_samples=10, chunk_size=2)
    assert traces_made == []


def test_a_model_that_reads_a_draw_into_python_runs_eagerly(traces_made):
    x, y = data(dtype=torch.float32)
    pyro.clear_param_store()
    guide = DropoutGuide(raw_regression, dropout=0.3)
    guide(x, y)

    def thresholded(x, y=None):  # a Python branch on a drawn weight's value
        w1 = pyro.sample("w1", dist.Normal(0.0, 1.0).expand([6, 2]).to_event(2))
        b1 = pyro.sample("b1", dist.Normal(0.0, 1.0).expand([6]).to_event(1))
        w2 = pyro.sample("w2", dist.Normal(0.0, 1.0).expand([1, 6]).to_event(2))
        shift = 1.0 if float(w1.sum()) > 0 else -1.0
        mu = linear(torch.relu(linear(x, w1, b1)), w2).squeeze(-1) + shift
        with pyro.plate("data", x.shape[-2]):
            return pyro.sample("obs", dist.Normal(mu, 0.5), obs=y)

    traced, eager, *_ = _both(thresholded, guide, x, y, num_samples=CHUNKS, chunk_size=1)
    assert traces_made == [None]  # the tracer saw the value read: no trace, nothing drawn
    _assert_same(traced, eager)


@pytest.fixture
def traced_anew(monkeypatch):
    """Each trace made (not taken from those kept with the guide)."""
    made = []
    original = traced_chunks._trace

    def spy(*args):
        made.append(original(*args))
        return made[-1]

    monkeypatch.setattr(traced_chunks, "_trace", spy)
    return made


def test_a_later_call_checks_and_uses_the_kept_trace(traces_made, traced_anew):
    model, guide, x, y = _mlp()
    predict(model, guide, x, y, num_samples=CHUNKS, chunk_size=1)
    traced, eager, after_traced, after_eager = _both(model, guide, x, y, num_samples=CHUNKS, chunk_size=1)
    assert len(traced_anew) == 1 and all(isinstance(t, TracedChunk) for t in traces_made)
    _assert_same(traced, eager)
    assert torch.equal(after_traced, after_eager)


class _Shifted:
    """A model with a Python setting that a trace freezes."""

    def __init__(self) -> None:
        self.shift = 0.0

    def __call__(self, x, y=None):
        w1 = pyro.sample("w1", dist.Normal(0.0, 1.0).expand([6, 2]).to_event(2))
        b1 = pyro.sample("b1", dist.Normal(0.0, 1.0).expand([6]).to_event(1))
        w2 = pyro.sample("w2", dist.Normal(0.0, 1.0).expand([1, 6]).to_event(2))
        mu = linear(torch.relu(linear(x, w1, b1)), w2).squeeze(-1) + self.shift
        with pyro.plate("data", x.shape[-2]):
            return pyro.sample("obs", dist.Normal(mu, 0.5), obs=y)


def test_a_kept_trace_that_no_longer_matches_is_made_again(traced_anew):
    x, y = data(dtype=torch.float32)
    pyro.clear_param_store()
    model = _Shifted()
    guide = DropoutGuide(model, dropout=0.3)
    guide(x, y)
    predict(model, guide, x, y, num_samples=CHUNKS, chunk_size=1)
    model.shift = 1.0  # the kept trace still adds 0
    traced, eager, *_ = _both(model, guide, x, y, num_samples=CHUNKS, chunk_size=1)
    assert len(traced_anew) == 2 and all(t is not None for t in traced_anew)
    _assert_same(traced, eager)


def test_kept_traces_are_few_and_go_with_their_guide(traced_anew):
    model, guide, x, y = _mlp()
    for n in range(2, 4 + traced_chunks.MAX_KEPT_TRACES):
        predict(model, guide, x[:n], y[:n], num_samples=CHUNKS, chunk_size=1)
    assert len(traced_chunks._KEPT[guide]) == traced_chunks.MAX_KEPT_TRACES
    gone = weakref.ref(guide)
    del guide
    gc.collect()
    assert gone() is None
