"""A DQN whose Q-network is a dropout network in Pyro: a replay buffer, a target network of the
expected weights, and the policy (Thompson sampling or ε-greedy) from :mod:`pyro_dropout.policies`."""

from __future__ import annotations

from typing import Any, cast

import pyro
import torch
from pyro import poutine

from pyro_dropout.guides import DropoutGuide
from pyro_dropout.infer import CompiledSVI, DropoutELBO
from pyro_dropout.policies import EpsilonGreedy, ThompsonSampling

from ..bandit.model import RewardModel
from .settings import RLSettings

__all__ = ["QAgent", "Replay"]


class Replay:
    """A ring buffer of transitions ``(state, action, reward, next state, terminal)``."""

    def __init__(self, capacity: int, state_size: int) -> None:
        self.states = torch.zeros(capacity, state_size)
        self.next_states = torch.zeros(capacity, state_size)
        self.actions = torch.zeros(capacity, dtype=torch.long)
        self.rewards = torch.zeros(capacity)
        self.terminal = torch.zeros(capacity)
        self.capacity, self.size, self.next = capacity, 0, 0

    def add(
        self, state: torch.Tensor, action: int, reward: float, next_state: torch.Tensor, end: bool
    ) -> None:
        i = self.next
        self.states[i], self.actions[i], self.rewards[i] = state, action, reward
        self.next_states[i], self.terminal[i] = next_state, float(end)
        self.next, self.size = (i + 1) % self.capacity, min(self.size + 1, self.capacity)

    def sample(self, n: int) -> torch.Tensor:
        """``[n]`` row indices, uniformly with replacement."""
        return torch.randint(self.size, (n,))


class QAgent:
    """The Q-network (:class:`~pyro_dropout_experiments.bandit.RewardModel`: two ReLU layers, one
    output per action, ``Normal(Q(s, a), 1/τ)`` on the TD target), its guide and its policy.

    ``thompson``: p before every weight layer, one draw per decision, one draw per minibatch.
    ``epsilon-greedy``: the same network without dropout (the point estimate), ε annealed.
    """

    def __init__(self, policy: str, state_size: int, actions: int, s: RLSettings, seed: int) -> None:
        pyro.clear_param_store()
        p = s.dropout if policy == "thompson" else 0.0
        first = s.input_dropout if policy == "thompson" else 0.0
        self.model = RewardModel(state_size, actions, (s.hidden, s.hidden), p, input_dropout=first)
        self.guide = DropoutGuide(self.model, dropout=None if p > 0 else 0.0)  # 0: a point estimate
        self.svi = CompiledSVI(
            self.model, self.guide, cast(Any, pyro.optim).Adam({"lr": s.lr}), DropoutELBO()
        )
        self.chooser: Any = (
            ThompsonSampling(self.model, self.guide)
            if policy == "thompson"
            else EpsilonGreedy(self.model, self.guide, 1.0, seed=seed)
        )
        self.s, self.policy, self.actions = s, policy, actions
        self.target: dict[str, torch.Tensor] = {}
        self.batches = 0

    def act(self, state: torch.Tensor) -> int:
        """The action for one state (before the first batch, the burn-in, a random one)."""
        if self.batches == 0:
            return int(torch.randint(self.actions, ()))
        if isinstance(self.chooser, EpsilonGreedy):
            fall = min(1.0, self.batches / (self.s.anneal * self.s.batches))
            self.chooser.epsilon = 1.0 + fall * (self.s.epsilon - 1.0)
        return int(self.chooser.act(state.unsqueeze(0))[0])

    def learn(self, replay: Replay) -> float:
        """One minibatch: regress Q(s, a) on r + γ max Q_target(s', ·); returns the loss."""
        if self.batches % self.s.target_every == 0:
            if self.batches == 0:  # the guide's first call sets it up
                rows = replay.sample(1)
                self.guide(replay.states[rows], replay.actions[rows], replay.rewards[rows])
            self.target = self.guide.median()
        rows = replay.sample(self.s.batch_size)
        with torch.no_grad(), poutine.block():
            after = poutine.condition(self.model.action_values, data=self.target)(replay.next_states[rows])
        y = replay.rewards[rows] + self.s.gamma * (1 - replay.terminal[rows]) * after.max(-1).values
        self.batches += 1
        return float(self.svi.step(replay.states[rows], replay.actions[rows], y, num_data=self.s.buffer))
