"""Prediction's chunks recorded once and replayed: the same draws as the eager chunks, a stale
graph found at the first chunk of the next call (and within CHECK_EVERY chunks of a stream), the
chunk's width measured once per input shape, and no crash at any number of chunks."""

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


def _kept(guide):
    return recorded._KEPT.get(guide)


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
    assert len(_kept(guide).graphs) == 1  # 30 chunks of 2: recorded
    for site in ("mean", "obs"):
        assert torch.allclose(graphs.samples[site], eager.samples[site], atol=1e-6)
    assert graphs.kinds == eager.kinds and set(graphs.observed) == set(eager.observed)
    again = _predict(model, guide, x, True, monkeypatch, seed=1, num_samples=60, chunk_size=2)
    assert not torch.allclose(again.samples["mean"], graphs.samples["mean"])  # fresh masks each call
    # the parameters trained on: another key, recorded again, with the new values
    with torch.no_grad():
        pyro.get_param_store()["DropoutGuide.locs.output.bias"].unconstrained().add_(5.0)
    moved = _predict(model, guide, x, True, monkeypatch, num_samples=60, chunk_size=2)
    assert torch.allclose(moved.samples["mean"], eager.samples["mean"] + 5.0, atol=1e-5)
    assert len(_kept(guide).graphs) == 1  # the graph of the earlier values dropped, not kept beside


SHIFT = {"value": 0.0}


class _ReadsAGlobal(PyroModule):
    def __init__(self):
        super().__init__()
        self.layer = Linear(3, 1)

    def forward(self, x, y=None):
        mean = self.layer(x).squeeze(-1) + SHIFT["value"]  # a value no key sees
        with pyro.plate("data", x.shape[0]):
            return pyro.sample("obs", dist.Normal(mean, 1.0), obs=y)


def test_a_global_changed_between_calls_is_found_at_the_first_chunk(monkeypatch):
    pyro.clear_param_store()
    model = _ReadsAGlobal()
    guide = DropoutGuide(model, dropout=0.2)
    x = torch.randn(10, 3)
    guide(x[:2], torch.zeros(2))
    before = _predict(model, guide, x, True, monkeypatch, num_samples=50, chunk_size=2)
    assert len(_kept(guide).graphs) == 1
    monkeypatch.setitem(SHIFT, "value", 100.0)
    after = _predict(model, guide, x, True, monkeypatch, num_samples=50, chunk_size=2)
    assert torch.allclose(after.means["obs"], before.means["obs"] + 100.0, atol=1e-4)  # not the stale graph
    assert len(_kept(guide).graphs) == 0 and len(_kept(guide).eager) == 1


def test_a_global_changed_between_streamed_chunks_is_found_within_check_every_chunks(monkeypatch):
    """predict_chunks hands its chunks over one by one: a global the caller changes between them is
    found by the check of every CHECK_EVERY-th chunk, and the chunks after it are the eager ones."""
    pyro.clear_param_store()
    model = _ReadsAGlobal()
    guide = DropoutGuide(model, dropout=0.2)
    x = torch.randn(10, 3)
    guide(x[:2], torch.zeros(2))
    monkeypatch.setattr(recorded, "RECORD_FROM", 24)
    chunks = 3 * recorded.CHECK_EVERY
    stream = predict_chunks(model, guide, x, num_samples=2 * chunks, chunk_size=2)
    shifted = []
    for i, chunk in enumerate(stream):
        if i == 1:
            monkeypatch.setitem(SHIFT, "value", 100.0)  # after the first chunk, which records the graph
        shifted.append(bool(chunk.means["obs"].mean() > 50.0))
    stale = shifted.index(True) - 1  # the chunks after the change that ran the stale graph
    assert 0 <= stale < recorded.CHECK_EVERY and all(shifted[stale + 1 :])
    assert len(_kept(guide).graphs) == 0 and len(_kept(guide).eager) == 1


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
    with torch.no_grad():  # new parameter values: measured again with the graphs' new state
        pyro.get_param_store()["DropoutGuide.locs.output.bias"].unconstrained().add_(1.0)
    predict(model, guide, torch.randn(40, 3), num_samples=100)
    assert len(measured) == 3


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
    assert len(_kept(bnn.guide).graphs) == 1  # 30 chunks of 2: recorded
    assert probs[True].shape == (60, 12, 3)
    assert torch.allclose(probs[True], probs[False], atol=1e-5)
