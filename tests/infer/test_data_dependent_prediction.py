"""A model that makes a shape from its data (``f[x[:, 0] > 0]``) predicts on any number of calls and
chunk sizes, its recorded chunks refused (on 0a1ecd5, ``predict(..., chunk_size=2)`` raised on a
second call with an x of the same shape), with the eager chunks' draws."""

import pyro
import pyro.distributions as dist
import pytest
import torch
from pyro.nn import PyroModule

import pyro_dropout.prediction.recorded as recorded
from pyro_dropout import DropoutGuide, predict
from pyro_dropout.nn import Linear


class Selecting(PyroModule):
    """Predicts only the rows whose first input is positive."""

    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = Linear(2, 8), Linear(8, 1)

    def forward(self, x, y=None):
        keep = x[:, 0] > 0
        mu = self.fc2(torch.relu(self.fc1(x))).squeeze(-1)[..., keep]  # works under batched draws
        with pyro.plate("data", mu.shape[-1]):
            return pyro.sample("obs", dist.Normal(mu, 0.5), obs=None if y is None else y[keep])


@pytest.mark.parametrize("chunk_size", [1, 2, 7, None])
def test_a_shape_made_from_the_data_predicts_on_every_call_and_chunk_size(chunk_size, monkeypatch):
    monkeypatch.setattr(recorded, "RECORD_FROM", 2)  # record wherever a call has two chunks
    pyro.clear_param_store()
    model = Selecting()
    guide = DropoutGuide(model, dropout=0.2)
    g = torch.Generator().manual_seed(0)
    guide(torch.randn(6, 2, generator=g), torch.zeros(6))  # set up with observations: obs is observed
    for call in range(4):  # a new selection of rows at every call, the shape of x the same
        x = torch.randn(6, 2, generator=g)
        pyro.set_rng_seed(call)
        got = predict(model, guide, x, num_samples=14, chunk_size=chunk_size).samples["obs"]
        monkeypatch.setattr(recorded, "RECORD_FROM", 10**9)  # the eager chunks, from the same seed
        pyro.set_rng_seed(call)
        want = predict(model, guide, x, num_samples=14, chunk_size=chunk_size).samples["obs"]
        monkeypatch.setattr(recorded, "RECORD_FROM", 2)
        assert got.shape == (14, int((x[:, 0] > 0).sum()))
        assert torch.allclose(got, want)
    said = recorded.explain_chunks(model, guide)
    assert chunk_size in (None, 7) or "shape" in said, said
