"""Random-shooting model-predictive control on one function drawn from the dynamics model.

For each decision the planner rolls ``candidates`` random action sequences ``horizon`` steps
through the drawn function and takes the first action of the best: the sequence that keeps the
predicted pole up longest, near upright and near the centre. One draw per episode makes the
agent explore as posterior sampling does (a plausible world, followed for an episode)."""

from __future__ import annotations

from collections.abc import Callable

import torch

__all__ = ["CartPoleScales", "plan"]


class CartPoleScales:
    """The standardisation of states and changes, fixed from the first (random) episodes."""

    def __init__(self, states: torch.Tensor, changes: torch.Tensor) -> None:
        self.state_mean, self.state_sd = states.mean(0), states.std(0).clamp_min(1e-3)
        self.change_sd = changes.std(0).clamp_min(1e-6)

    def inputs(self, states: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """``[..., state + 1]``: the standardised state and the action as ±1."""
        pushed = (2 * actions.to(states.dtype) - 1).unsqueeze(-1)
        return torch.cat([(states - self.state_mean) / self.state_sd, pushed], -1)


def plan(
    change: Callable[[torch.Tensor], torch.Tensor],
    state: torch.Tensor,
    scales: CartPoleScales,
    limits: tuple[float, float],
    candidates: int,
    horizon: int,
    generator: torch.Generator,
) -> int:
    """The first action of the best of ``candidates`` random sequences under ``change`` (the
    drawn function: standardised inputs -> standardised change). ``limits``: the cart position
    and pole angle at which an episode ends."""
    x_max, theta_max = limits
    actions = torch.randint(2, (candidates, horizon), generator=generator)
    s = state.expand(candidates, -1).clone()
    alive = torch.ones(candidates, dtype=torch.bool)
    score = torch.zeros(candidates)
    with torch.no_grad():
        for h in range(horizon):
            s = s + change(scales.inputs(s, actions[:, h])) * scales.change_sd
            alive &= (s[:, 0].abs() < x_max) & (s[:, 2].abs() < theta_max)
            score += alive * (2 - (s[:, 2] / theta_max) ** 2 - (s[:, 0] / x_max) ** 2) / 2
    return int(actions[score.argmax(), 0])
