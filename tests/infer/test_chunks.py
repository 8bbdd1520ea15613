"""The sizes of prediction chunks: from the cache on a CPU, from the widest layer of one draw."""

import pytest
import torch

from pyro_dropout import DropoutGuide, predict
from pyro_dropout.nn import MLP
from pyro_dropout.prediction.chunks import (
    ACCELERATOR_CHUNK_BYTES,
    MAX_AUTO_CHUNK,
    auto_chunk_size,
    chunk_sizes,
    largest_tensor_bytes,
)
from pyro_dropout.prediction.predictive import predict_chunks


def test_chunk_sizes_cover_the_draws():
    assert chunk_sizes(10, 4) == [4, 4, 2]
    assert chunk_sizes(3, 5) == [3]


def test_the_widest_tensor_of_a_pass_is_measured():
    x = torch.randn(100, 13)
    w = torch.randn(50, 13)
    out, largest = largest_tensor_bytes(lambda: torch.relu(x @ w.T).sum(-1))
    assert out.shape == (100,)
    assert largest == 100 * 50 * 4  # the hidden layer, not the inputs or the sums


def test_broadcast_views_are_not_counted():
    x = torch.randn(10)
    _, largest = largest_tensor_bytes(lambda: x.expand(1000, 10))
    assert largest == 0


def test_auto_chunk_keeps_a_chunk_within_a_quarter_of_the_cache(monkeypatch):
    monkeypatch.setenv("PYRO_DROPOUT_CACHE_MB", "8")
    cpu = torch.device("cpu")
    assert auto_chunk_size(cpu, 2 * 2**20, 1000) == 1  # 2 MB a draw: 2 MB of an 8 MB cache
    assert auto_chunk_size(cpu, 2**16, 1000) == 32  # 64 KB a draw
    assert auto_chunk_size(cpu, 100 * 2**20, 1000) == 1  # wider than the cache: one draw
    assert auto_chunk_size(cpu, 16, 1000) == MAX_AUTO_CHUNK
    assert auto_chunk_size(cpu, 16, 7) == 7


def test_auto_chunk_on_a_gpu_takes_few_large_chunks_within_a_memory_budget(monkeypatch):
    meta = torch.device("meta")  # not a CPU, and no free memory to ask
    assert auto_chunk_size(meta, 2**16, 1000) == 1000  # 64 MB in all: one chunk
    assert ACCELERATOR_CHUNK_BYTES // (2 * 2**20) == 512  # 2 MB a draw: 512 fit in the budget ...
    assert auto_chunk_size(meta, 2 * 2**20, 1000) == 500  # ... so two even chunks of 500
    assert auto_chunk_size(meta, 2 * 2**20, 1500) == 500  # three
    assert auto_chunk_size(meta, 4 * ACCELERATOR_CHUNK_BYTES, 1000) == 1
    cuda = torch.device("cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (140 * 2**30, 141 * 2**30))
    assert auto_chunk_size(cuda, 2 * 2**20, 1000) == 1000  # an eighth of 140 GB free: no fixed cap
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (2 * 2**30, 16 * 2**30))
    assert auto_chunk_size(cuda, 2 * 2**20, 1000) == 125  # 256 MB (an eighth of 2 GB free): 128 fit, 8 chunks


def _chunk_of(model, guide, x, num_samples, site):
    """The draws of the first chunk ``predict`` makes."""
    return next(iter(predict_chunks(model, guide, x, num_samples=num_samples, return_sites=[site])))[
        site
    ].shape[0]


def test_predict_sizes_its_chunks_from_the_widest_layer(monkeypatch):
    monkeypatch.setenv("PYRO_DROPOUT_CACHE_MB", "1")
    model = MLP(3, hidden=(64,))
    guide = DropoutGuide(model, dropout=0.1)
    x = torch.randn(256, 3)
    pred = predict(model, guide, x, num_samples=40, return_sites=["mean"])
    assert pred["mean"].shape == (40, 256)
    assert _chunk_of(model, guide, x, 40, "mean") == 4  # 256 x 64 floats = 64 KB a draw, in a quarter of 1 MB


def test_a_reported_last_level_cache_is_capped(monkeypatch):
    """A virtual machine may report its host's whole L3 (300 MiB): a chunk is sized for at most 32 MiB."""
    import pyro_dropout.prediction.chunks as chunks_module

    monkeypatch.delenv("PYRO_DROPOUT_CACHE_MB", raising=False)
    monkeypatch.setattr(chunks_module, "cache_bytes", lambda: 300 * 2**20)
    assert auto_chunk_size(torch.device("cpu"), 2 * 2**20, 1000) == 4  # 8 MiB / 2 MiB a draw
    monkeypatch.setenv("PYRO_DROPOUT_CACHE_MB", "300")  # told: no cap
    assert auto_chunk_size(torch.device("cpu"), 2 * 2**20, 1000) == 37


@pytest.mark.parametrize("bad", [0, -1, 2.5, "big", True])
def test_bad_chunk_sizes_are_named(bad):
    model = MLP(3, hidden=(4,))
    guide = DropoutGuide(model, dropout=0.1)
    with pytest.raises(ValueError, match="chunk_size must be a positive int, 'auto' or None"):
        predict(model, guide, torch.randn(5, 3), num_samples=4, chunk_size=bad)


def test_a_pass_shared_by_the_draws_runs_once_per_chunk_of_many_draws(monkeypatch):
    """LeNet under dropout of its last layer only: the convolutions (one draw's widest tensors) are
    the same for every draw, so the chunk is sized by what a draw adds (its last layer's output)."""
    import pyro_dropout.prediction.engine as engine_module
    from pyro_dropout.nn import LeNet

    monkeypatch.setenv("PYRO_DROPOUT_CACHE_MB", "1")
    x = torch.randn(64, 1, 28, 28)
    for dropout_all, chunk in [(0.0, 40), (0.1, 1)]:  # conv masks: every tensor grows with the draws
        model = LeNet(num_data=64, dropout_all=dropout_all)
        guide = DropoutGuide(model)
        guide(x[:2], torch.zeros(2, dtype=torch.long))
        pred = predict(model, guide, x, num_samples=40, return_sites=["logits"])
        assert pred["logits"].shape == (40, 64, 10)
        assert (
            _chunk_of(model, guide, x, 40, "logits") == chunk
        )  # conv1's output, 64 x 20 x 24 x 24 floats, is 2.8 MB: over the 1 MB cache
    model = LeNet(num_data=64)
    guide = DropoutGuide(model)
    guide(x[:2], torch.zeros(2, dtype=torch.long))
    assert (
        _chunk_of(model, guide, x, engine_module.MEASURE_FROM - 1, "logits") == 1
    )  # too few draws to be worth measuring: one draw's widest tensor sets the chunk
