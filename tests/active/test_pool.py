"""Consistent draws over a pool: one call, chunks and a DataLoader give the same draws."""

import pyro
import pytest
import torch

from pyro_dropout import DropoutGuide
from pyro_dropout.active import PoolDraws, pool_probs
from pyro_dropout.metrics import batch_bald
from pyro_dropout.nn import MLP


@pytest.fixture
def classifier():
    pyro.clear_param_store()
    model = MLP(4, 3, hidden=(16,), likelihood="categorical")
    guide = DropoutGuide(model, dropout=0.3)
    guide(torch.randn(5, 4), torch.zeros(5, dtype=torch.long))
    return model, guide


def test_a_pool_scored_in_one_call_in_chunks_and_by_a_loader_gives_the_same_draws(classifier):
    model, guide = classifier
    pool = torch.randn(50, 4, generator=torch.Generator().manual_seed(0))
    whole = pool_probs(model, guide, pool, num_samples=8, seed=3)
    chunks = pool_probs(model, guide, pool, num_samples=8, seed=3, batch_size=7)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(pool), batch_size=16)
    streamed = pool_probs(model, guide, loader, num_samples=8, seed=3)
    assert whole.shape == (8, 50, 3)
    assert torch.allclose(whole, chunks, atol=1e-6) and torch.allclose(whole, streamed, atol=1e-6)
    assert not torch.allclose(whole[0], whole[1])  # the draws are distinct functions
    other = pool_probs(model, guide, pool, num_samples=8, seed=4)
    assert not torch.allclose(whole, other)  # the seed chooses them
    # each draw is one function: row i's probabilities do not depend on the batch it came in
    draws = PoolDraws(model, guide, pool, num_samples=8, seed=3)
    assert torch.allclose(draws.probs(pool[10:11]), whole[:, 10:11], atol=1e-6)
    chosen, _ = batch_bald(whole.double(), 3)
    assert len(set(chosen.tolist())) == 3


def test_what_cannot_be_drawn_consistently_is_refused(classifier):
    model, guide = classifier
    with pytest.raises(ValueError, match="num_samples must be an int >= 2"):
        pool_probs(model, guide, torch.randn(4, 4), num_samples=1)
    with pytest.raises(ValueError, match="batch_size must be a positive int"):
        pool_probs(model, guide, torch.randn(4, 4), batch_size=0)


def test_a_converted_network_is_consistent_with_shared_masks_and_refused_with_its_own():
    from torch import nn

    from pyro_dropout import MCDropout

    net = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 3))
    x = torch.randn(20, 4, generator=torch.Generator().manual_seed(1))
    shared = MCDropout(net, "classification", masks="shared")
    shared.predict(x[:2], num_samples=2)  # sets the guide up
    whole = pool_probs(shared.model, shared.guide, x, num_samples=5)
    assert torch.allclose(whole, pool_probs(shared.model, shared.guide, x, num_samples=5, batch_size=6))
    own = MCDropout(net, "classification", masks="own")
    own.predict(x[:2], num_samples=2)
    with pytest.raises(ValueError, match=r"draws randomness of its own .* masks='shared'"):
        pool_probs(own.model, own.guide, x, num_samples=5)
