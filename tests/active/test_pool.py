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
    with pytest.raises(ValueError, match="the guide has not met the model yet: train it first"):
        PoolDraws(model, DropoutGuide(model), torch.randn(4, 4))
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


def test_point_weights_are_kept_once_so_the_layers_before_the_dropout_run_once_for_all_draws():
    from pyro_dropout.nn import KerasCNN
    from pyro_dropout.prediction import predict_from_samples

    pyro.clear_param_store()
    model = KerasCNN(filters=4, hidden=8, kernel=4, dropout=(0.25, 0.5))
    guide = DropoutGuide(model)
    x = torch.rand(6, 1, 28, 28, generator=torch.Generator().manual_seed(0))
    guide(x[:2], torch.zeros(2, dtype=torch.long))
    draws = PoolDraws(model, guide, x, num_samples=24, seed=1)
    # the convolutions have no dropout: one value, expanded over the draws; the dense ones differ
    assert draws.samples["conv2.weight"].stride(0) == 0 and draws.samples["fc1.weight"].stride(0) != 0
    rows = []
    hook = model.conv2.register_forward_hook(lambda m, i, o: rows.append(tuple(o.shape)))
    probs = draws.probs(x)
    hook.remove()
    # the convolution ran on the 6 rows a few times (sizing the chunk, then one chunk), not per draw
    # (and once on two draws: the check that the model's batched draws are exact)
    assert len(rows) < 6 and rows[-1] == (6, 4, 22, 22), rows
    copied = {k: v.contiguous() for k, v in draws.samples.items()}
    again = predict_from_samples(model, copied, x, return_sites=("obs",)).probs["obs"]
    assert torch.allclose(probs, again, atol=1e-5)  # the same draws, in the same order


def test_a_generator_pool_is_scored_whole_and_no_global_generator_is_touched(classifier):
    """A generator of batches can be read once: all 30 rows are scored (the first batch was used up
    to look at it: 22 of 30 scored), and the caller's NumPy and random states are not reseeded."""
    import random

    import numpy as np

    model, guide = classifier
    pool = torch.randn(30, 4, generator=torch.Generator().manual_seed(0))
    random.seed(11)
    np.random.seed(11)  # noqa: NPY002  (the caller's global generator, which must stay as it is)
    python, numpy = random.getstate(), np.random.get_state()[1].copy()  # noqa: NPY002
    streamed = pool_probs(model, guide, ((pool[i : i + 8],) for i in range(0, 30, 8)), num_samples=4, seed=1)
    assert streamed.shape == (4, 30, 3)
    assert torch.allclose(streamed, pool_probs(model, guide, pool, num_samples=4, seed=1), atol=1e-6)
    assert random.getstate() == python and (np.random.get_state()[1] == numpy).all()  # noqa: NPY002
    with pytest.raises(ValueError, match="no rows"):
        pool_probs(model, guide, torch.zeros(0, 4))
