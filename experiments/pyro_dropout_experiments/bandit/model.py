"""The reward model of the bandit: an MLP scoring every action for a context; the chosen
action's reward is observed, ``Normal(score, 1/τ)`` with the precision τ a point estimate."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyro
import pyro.distributions as dist
import torch
from pyro.nn import PyroModule, PyroModuleList, PyroSample

from pyro_dropout.nn import Linear

__all__ = ["RewardModel"]


class RewardModel(PyroModule):
    """``action_values(x)`` ``[..., N, actions]``; ``forward(x, action, reward=None, num_data=None)``.

    :param dropout: the drop probability of every hidden layer's inputs.
    :param input_dropout: the drop probability of the contexts (default none).
    """

    def __init__(
        self, contexts: int, actions: int, hidden: Sequence[int] = (50, 50), dropout: float = 0.2,
        length_scale: float = 1e-2, input_dropout: float = 0.0,
    ) -> None:  # fmt: skip
        super().__init__()
        sizes = [contexts, *hidden, actions]
        rates = [input_dropout] + [dropout] * len(hidden)
        self.layers = PyroModuleList(
            [
                Linear(a, b, length_scale=length_scale, dropout=p)
                for a, b, p in zip(sizes[:-1], sizes[1:], rates, strict=True)
            ]
        )
        self.tau: Any = PyroSample(dist.Gamma(torch.tensor(1.0), torch.tensor(0.01)))

    def action_values(self, x: torch.Tensor) -> torch.Tensor:
        h = x
        for layer in self.layers[:-1]:
            h = torch.relu(layer(h))
        return self.layers[-1](h)

    def forward(
        self,
        x: torch.Tensor,
        action: torch.Tensor,
        reward: torch.Tensor | None = None,
        num_data: int | None = None,
    ) -> torch.Tensor:
        values = self.action_values(x)
        index = action.long().expand(values.shape[:-1]).unsqueeze(-1)
        mean = values.gather(-1, index).squeeze(-1)
        scale, n = self.tau.rsqrt(), x.shape[-2]  # (the precision is drawn outside the data plate)
        with pyro.plate("data", num_data or n, subsample=torch.arange(n)):
            return pyro.sample("obs", dist.Normal(mean, scale), obs=reward)
