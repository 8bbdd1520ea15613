"""Prediction's chunks recorded and replayed under a guard read before every chunk: the same draws
as the eager chunks, a global changed between calls or between streamed chunks seen at the very next
chunk, a new parameter state replacing the graph (none piles up), the chunk's width measured once per
input shape, and no crash at any number of chunks."""

import pyro
import pyro.distributions as dist
import pytest
import torch
from pyro.nn import PyroModule
from torch import nn

import pyro_dropout.prediction.engine as engine
import pyro_dropout.prediction.recorded as recorded
from pyro_dropout import DropoutGuide, MCDropout, predict
from pyro_dropout.nn import MLP, Linear
from pyro_dropout.prediction.predictive import predict_chunks


def _graphs(guide, model):
    return sum(len(r.graphs) for r in recorded.chunk_graphs(guide, model).routes.by_key.values())


def _predict(model, guide, x, record, monkeypatch, seed=0, **kwargs):
    monkeypatch.setattr(recorded, "RECORD_FROM", 24 if record else 10**9)
    pyro.set_rng_seed(seed)
    return predict(model, guide, x, **kwargs)


def test_recorded_chunks_give_the_eager_chunks_draws(monkeypatch):
    pyro.clear_param_store()
    model = MLP(3, hidden=(16,))
    guide = DropoutGuide(model, dropout=0.2)
    x = torch.randn(40, 3)
    guide(x[:2], torch.zeros(2))
    eager = _predict(model, guide, x, False, monkeypatch, num_samples=60, chunk_size=2)
    graphs = _predict(model, guide, x, True, monkeypatch, num_samples=60, chunk_size=2)
    assert _graphs(guide, model) == 1  # 30 chunks of 2: recorded
    for site in ("mean", "obs"):
        assert torch.allclose(graphs.samples[site], eager.samples[site], atol=1e-6)
    assert graphs.kinds == eager.kinds and set(graphs.observed) == set(eager.observed)
    again = _predict(model, guide, x, True, monkeypatch, seed=1, num_samples=60, chunk_size=2)
    assert not torch.allclose(again.samples["mean"], graphs.samples["mean"])  # fresh masks each call
    route = next(iter(recorded.chunk_graphs(guide, model).routes.by_key.values()))
    assert route.replays >= 2 * 29  # every chunk of the second and third calls but the first's
    # the parameters trained on: the guard sees it, and the graph (of these values) replaces the last
    with torch.no_grad():
        pyro.get_param_store()["DropoutGuide.locs.output.bias"].unconstrained().add_(5.0)
    moved = _predict(model, guide, x, True, monkeypatch, num_samples=60, chunk_size=2)
    assert torch.allclose(moved.samples["mean"], eager.samples["mean"] + 5.0, atol=1e-5)
    assert _graphs(guide, model) == 1  # none of the earlier values kept beside


SHIFT = {"value": 0.0}


class _ReadsAGlobal(PyroModule):
    def __init__(self):
        super().__init__()
        self.layer = Linear(3, 1)

    def forward(self, x, y=None):
        mean = self.layer(x).squeeze(-1) + SHIFT["value"]  # a value in a global dict
        with pyro.plate("data", x.shape[0]):
            return pyro.sample("obs", dist.Normal(mean, 1.0), obs=y)


def test_a_global_changed_between_calls_is_seen_at_the_next_chunk(monkeypatch):
    pyro.clear_param_store()
    model = _ReadsAGlobal()
    guide = DropoutGuide(model, dropout=0.2)
    x = torch.randn(10, 3)
    guide(x[:2], torch.zeros(2))
    before = _predict(model, guide, x, True, monkeypatch, num_samples=50, chunk_size=2)
    assert _graphs(guide, model) == 1
    monkeypatch.setitem(SHIFT, "value", 100.0)
    after = _predict(model, guide, x, True, monkeypatch, num_samples=50, chunk_size=2)
    assert torch.allclose(after.means["obs"], before.means["obs"] + 100.0, atol=1e-4)  # not the stale graph
    route = next(iter(recorded.chunk_graphs(guide, model).routes.by_key.values()))
    assert route.records == 2 and route.replays >= 2 * 23  # recorded again for the new value, replayed


def test_a_global_changed_between_streamed_chunks_is_seen_at_the_next_chunk(monkeypatch):
    """predict_chunks hands its chunks over one by one: a global the caller changes between them is
    seen by the guard of the very next chunk."""
    pyro.clear_param_store()
    model = _ReadsAGlobal()
    guide = DropoutGuide(model, dropout=0.2)
    x = torch.randn(10, 3)
    guide(x[:2], torch.zeros(2))
    monkeypatch.setattr(recorded, "RECORD_FROM", 24)
    stream = predict_chunks(model, guide, x, num_samples=200, chunk_size=2)
    shifted = []
    for i, chunk in enumerate(stream):
        if i == 40:
            monkeypatch.setitem(SHIFT, "value", 100.0)  # between the 41st chunk and the 42nd
        shifted.append(bool(chunk.means["obs"].mean() > 50.0))
    assert shifted == [False] * 41 + [True] * 59


def test_the_chunk_width_is_measured_once_per_input_shape(monkeypatch):
    pyro.clear_param_store()
    model = MLP(3, hidden=(16,))
    guide = DropoutGuide(model, dropout=0.2)
    guide(torch.randn(2, 3), torch.zeros(2))
    measured = []
    real = recorded.per_draw_bytes
    monkeypatch.setattr(recorded, "per_draw_bytes", lambda *a: measured.append(1) or real(*a))
    monkeypatch.setattr(engine, "auto_chunk_size", lambda *a, **k: 10)  # chunks under the draws, on any cache
    for n in (40, 40, 30, 40):
        predict(model, guide, torch.randn(n, 3), num_samples=100)
    assert len(measured) == 2  # one per input shape (40, then 30), kept with the guide
    with torch.no_grad():  # new parameter values: a draw's memory is the same, not measured again
        pyro.get_param_store()["DropoutGuide.locs.output.bias"].unconstrained().add_(1.0)
    predict(model, guide, torch.randn(40, 3), num_samples=100)
    assert len(measured) == 2


class _Residual(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp, self.block, self.out = nn.Linear(4, 16), nn.Linear(16, 16), nn.Linear(16, 3)
        self.drop, self.last = nn.Dropout(0.3), nn.Dropout(0.2)

    def forward(self, x):
        h = torch.relu(self.inp(x))
        h = h + self.drop(torch.relu(self.block(h)))  # a skip connection around a dropout
        return self.out(self.last(h))


@pytest.mark.parametrize("masks", ["own", "shared"])
def test_a_skip_connection_network_predicts_in_many_chunks_without_a_crash(masks, monkeypatch):
    """The earlier TorchScript recording segfaulted with 24 or more chunks on a U-Net."""
    x = torch.randn(12, 4)
    bnn = MCDropout(_Residual(), "classification", masks=masks)
    bnn.predict(x[:2], num_samples=2)  # sets the guide up
    probs = {}
    for record in (False, True):
        draws = _predict(bnn.model, bnn.guide, x, record, monkeypatch, num_samples=60, chunk_size=2)
        probs[record] = draws.probs["obs"]
    assert _graphs(bnn.guide, bnn.model) == 1, recorded.chunk_graphs(bnn.guide, bnn.model).explain()
    assert probs[True].shape == (60, 12, 3)
    assert torch.allclose(probs[True], probs[False], atol=1e-5)


def test_the_recorded_chunks_kept_with_a_guide_do_not_keep_it_alive(monkeypatch):
    """The chunks' routes are kept with the guide (a weak mapping): their guards read the model and
    guide through weak references, so deleting both frees them, graphs and all."""
    import gc
    import weakref

    monkeypatch.setattr(recorded, "RECORD_FROM", 2)
    model = MLP(3, hidden=(8,))
    guide = DropoutGuide(model, dropout=0.2)
    guide(torch.randn(4, 3), torch.zeros(4))
    predict(model, guide, torch.randn(5, 3), num_samples=20, chunk_size=2)
    assert _graphs(guide, model) == 1
    refs = weakref.ref(guide), weakref.ref(model)
    del guide, model
    gc.collect()
    assert all(ref() is None for ref in refs)
