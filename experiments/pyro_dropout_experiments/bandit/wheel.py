r"""The wheel bandit (Riquelme, Tucker & Snoek 2018, §4 "Deep Bayesian Bandits Showdown").

Contexts are uniform on the unit disc; five actions. Action 0 pays :math:`\mathcal{N}(1.2, 0.01^2)`.
Inside the radius δ the other four pay :math:`\mathcal{N}(1.0, 0.01^2)`; outside it, the one of
actions 1-4 that matches the context's quadrant pays :math:`\mathcal{N}(50, 0.01^2)` and the
other three 1.0. The larger δ, the rarer the contexts where exploring pays, and the harder it
is to find them."""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["WheelBandit", "wheel_bandit"]

MEAN_SAFE, MEAN_OTHER, MEAN_BIG, NOISE = 1.2, 1.0, 50.0, 0.01


@dataclass
class WheelBandit:
    """``contexts`` ``[n, 2]``, every action's noisy reward ``rewards`` ``[n, 5]`` and its
    expected reward ``means`` ``[n, 5]``."""

    contexts: torch.Tensor
    rewards: torch.Tensor
    means: torch.Tensor

    def regret(self, actions: torch.Tensor) -> torch.Tensor:
        """``[n]``: the best expected reward minus the chosen action's, per context."""
        chosen = self.means.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)
        return self.means.max(-1).values - chosen


def wheel_bandit(delta: float, n: int, seed: int = 0) -> WheelBandit:
    """``n`` rounds of the wheel bandit with radius ``delta`` in ``(0, 1)``."""
    if not 0 < delta < 1:
        raise ValueError(f"wheel_bandit: delta must be in (0, 1), got {delta!r}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"wheel_bandit: n must be a positive int, got {n!r}")
    g = torch.Generator().manual_seed(seed)
    radius = torch.rand(n, generator=g, dtype=torch.float64).sqrt()  # uniform on the disc
    angle = 2 * torch.pi * torch.rand(n, generator=g, dtype=torch.float64)
    x, y = radius * angle.cos(), radius * angle.sin()
    means = torch.full((n, 5), MEAN_OTHER, dtype=torch.float64)
    means[:, 0] = MEAN_SAFE
    quadrant = 1 + (x < 0).long() * 1 + (y < 0).long() * 2  # (+,+) 1, (-,+) 2, (+,-) 3, (-,-) 4
    outside = radius > delta
    means[outside, quadrant[outside]] = MEAN_BIG
    rewards = means + NOISE * torch.randn(n, 5, generator=g, dtype=torch.float64)
    contexts = torch.stack([x, y], dim=-1).float()
    return WheelBandit(contexts, rewards.float(), means)
