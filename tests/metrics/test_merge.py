"""merge_reports: the report of a data set scored a batch at a time is the report of all its
points at once. Exactly (1e-6) where the draws are the same in both (a network without dropout:
every draw the same function); within Monte Carlo error where each batch draws its own."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from pyro_dropout import MCDropout
from pyro_dropout.metrics import merge_reports


def _deterministic(outputs: int) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, outputs)).eval()


@pytest.mark.parametrize("task", ["classification", "regression"])
def test_a_loader_scored_by_batches_is_the_whole_set_scored_at_once(task):
    torch.manual_seed(1)
    x = torch.randn(30, 4)
    y = torch.randint(0, 3, (30,)) if task == "classification" else torch.randn(30)
    with pytest.warns(UserWarning, match="mask no site"):  # no dropout: every draw the same function
        options = {"tau": 1.0} if task == "regression" else {}
        bnn = MCDropout(_deterministic(3 if task == "classification" else 1), task, num_samples=4, **options)
        whole = bnn.evaluate(x, y)
    merged = bnn.evaluate(DataLoader(TensorDataset(x, y), batch_size=7))
    for key, value in whole.as_dict().items():
        assert merged.as_dict()[key] == pytest.approx(value, abs=1e-6), key


def test_a_loader_with_dropout_agrees_within_monte_carlo_error():
    torch.manual_seed(2)
    net = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Dropout(0.2), nn.Linear(32, 3)).eval()
    x, y = torch.randn(60, 4), torch.randint(0, 3, (60,))
    bnn = MCDropout(net, "classification", num_samples=2000)
    whole, merged = bnn.evaluate(x, y), bnn.evaluate(DataLoader(TensorDataset(x, y), batch_size=16))
    assert merged.nll == pytest.approx(whole.nll, abs=0.01)  # sd of each over draws: ~0.002
    assert merged.probs.shape == whole.probs.shape == (60, 3)


def test_nothing_to_merge_is_refused():
    with pytest.raises(ValueError, match="no reports to merge"):
        merge_reports([], torch.zeros(0))
