"""The dynamics model: an MLP from (standardised state, action) to the standardised change of
the state, ``Normal(Δ, 1/τ)`` with one noise precision per state component (a point estimate)."""

from __future__ import annotations

import itertools
from typing import Any

import pyro
import pyro.distributions as dist
import torch
from pyro.nn import PyroModule, PyroModuleList, PyroSample

from pyro_dropout.nn import Linear

__all__ = ["DynamicsModel"]


class DynamicsModel(PyroModule):
    """``change(x)`` ``[..., N, state]``; ``forward(x, change=None, num_data=None)``.

    :param dropout: the drop probability of every weight layer's inputs (the first included).
    """

    def __init__(
        self, inputs: int, outputs: int, hidden: int = 200, dropout: float = 0.1, length_scale: float = 1e-2
    ) -> None:
        super().__init__()
        sizes = [inputs, hidden, hidden, outputs]
        self.layers = PyroModuleList(
            [Linear(a, b, length_scale=length_scale, dropout=dropout) for a, b in itertools.pairwise(sizes)]
        )
        self.tau: Any = PyroSample(dist.Gamma(torch.ones(outputs), 0.01 * torch.ones(outputs)).to_event(1))

    def change(self, x: torch.Tensor) -> torch.Tensor:
        h = x
        for layer in self.layers[:-1]:
            h = torch.relu(layer(h))
        return self.layers[-1](h)

    def forward(
        self, x: torch.Tensor, change: torch.Tensor | None = None, num_data: int | None = None
    ) -> torch.Tensor:
        out, scale, n = self.change(x), self.tau.rsqrt(), x.shape[-2]  # weights: outside the plate
        with pyro.plate("data", num_data or n, subsample=torch.arange(n)):
            mean = pyro.deterministic("mean", out, event_dim=1)
            return pyro.sample("obs", dist.Normal(mean, scale).to_event(1), obs=change)
