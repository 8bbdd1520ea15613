"""The forecaster: an LSTM with variational dropout reads a window of past increments and
predicts the next one, ``Normal(mean, 1/τ)`` with the precision τ a point estimate."""

from __future__ import annotations

from typing import Any

import pyro
import pyro.distributions as dist
import torch
from pyro.nn import PyroModule, PyroSample

from pyro_dropout.nn import LSTM, Linear

__all__ = ["Forecaster"]


class Forecaster(PyroModule):
    """``forward(x, y=None, num_data=None)``: windows ``[N, window, 1]``, next increments ``[N]``."""

    def __init__(self, hidden: int, layers: int, dropout: float, length_scale: float) -> None:
        super().__init__()
        self.lstm = LSTM(1, hidden, layers, batch_first=True, length_scale=length_scale, dropout=dropout)
        self.head = Linear(hidden, 1, length_scale=length_scale, dropout=dropout)
        self.tau: Any = PyroSample(dist.Gamma(torch.tensor(1.0), torch.tensor(0.01)))  # a vague prior

    def mean(self, x: torch.Tensor) -> torch.Tensor:
        """The next increment's mean ``[..., N]`` (leading dims: draws)."""
        out, _ = self.lstm(x)
        return self.head(out[..., -1, :]).squeeze(-1)

    def forward(
        self, x: torch.Tensor, y: torch.Tensor | None = None, num_data: int | None = None
    ) -> torch.Tensor:
        mean, tau = self.mean(x), self.tau
        n = x.shape[-3]
        with pyro.plate("data", num_data or n, subsample=torch.arange(n)):
            mean = pyro.deterministic("mean", mean, event_dim=0)
            return pyro.sample("obs", dist.Normal(mean, tau.rsqrt()), obs=y)
