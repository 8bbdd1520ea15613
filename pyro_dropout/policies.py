r"""Decisions from a model + guide: Thompson sampling with MC dropout, and ε-greedy beside it.

A model that scores every action for a context (``values(x)`` → ``[..., N, actions]``, by
default the model's ``action_values`` method) and a trained guide make a policy:

* :class:`ThompsonSampling` draws one function (one draw of the weights: one dropout mask) and
  takes the action that function scores best (paper 000 §5.4). ``per="decision"`` draws anew for
  every decision; ``per="episode"`` keeps the draw until :meth:`ThompsonSampling.resample`, so an
  episode follows one function ("deep exploration").
* :class:`EpsilonGreedy` takes the best action of the expected weights (standard dropout) and a
  uniformly random one with probability ε.

Usage:

    policy = ThompsonSampling(model, guide)
    action = policy.act(context)          # [N] action indices
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from pyro import poutine

from .infer.input_checks import has_non_finite
from .ops import check_seed

__all__ = ["EpsilonGreedy", "ThompsonSampling"]

Values = Callable[[torch.Tensor], torch.Tensor]


def _values_of(model: Any, values: Values | None, what: str) -> Values:
    found = values if values is not None else getattr(model, "action_values", None)
    if not callable(found):
        raise TypeError(
            f"{what}: give values=... (contexts -> [N, actions] scores) or a model with action_values"
        )
    return found


def _checked(x: object, what: str) -> torch.Tensor:
    if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.dim() < 2:
        raise ValueError(f"{what}: contexts must be a floating-point tensor [N, ...], got {x!r:.60}")
    if has_non_finite(x):
        raise ValueError(f"{what}: contexts hold NaN or infinite values")
    return x


def _trained(guide: Any, what: str) -> None:
    if getattr(guide, "prototype_trace", True) is None:  # an AutoGuide that has never run
        raise ValueError(
            f"{what}: the guide has never been called, so it holds no weights to draw from: train it "
            "with SVI first (or call guide(x) once)"
        )


def _scores(values: Values, x: torch.Tensor, what: str) -> torch.Tensor:
    """The ``values`` function's ``[N, actions]`` scores, checked: one row per context, at least
    one action, every score a number."""
    scores = values(x)
    n = x.shape[0]
    if not isinstance(scores, torch.Tensor) or scores.dim() < 2 or scores.shape[-2] != n:
        shape = tuple(scores.shape) if isinstance(scores, torch.Tensor) else type(scores).__name__
        raise ValueError(f"{what}: values(x) must give [N, actions] = [{n}, actions] scores, got {shape}")
    if scores.shape[-1] == 0:
        raise ValueError(f"{what}: values(x) gives scores of 0 actions: there is nothing to choose")
    if has_non_finite(scores):
        raise ValueError(f"{what}: values(x) gives NaN or infinite scores: no action is best")
    return scores


class ThompsonSampling:
    """Thompson sampling: the best action of one function drawn from the guide.

    :param per: ``"decision"`` (a new draw for each call of :meth:`act`) or ``"episode"`` (the same
        draw until :meth:`resample`).
    """

    def __init__(self, model: Any, guide: Any, values: Values | None = None, per: str = "decision") -> None:
        if per not in ("decision", "episode"):
            raise ValueError(f"ThompsonSampling: per must be 'decision' or 'episode', got {per!r}")
        self.model, self.guide, self.per = model, guide, per
        self.values = _values_of(model, values, "ThompsonSampling")
        self._draw: Any = None

    def resample(self) -> None:
        """Forget the current draw: the next decision draws a new function."""
        self._draw = None

    def scores(self, x: torch.Tensor) -> torch.Tensor:
        """``[N, actions]``: the drawn function's score of every action."""
        x = _checked(x, "ThompsonSampling")
        _trained(self.guide, "ThompsonSampling")
        with torch.no_grad(), poutine.block():
            if self._draw is None or self.per == "decision":
                self._draw = poutine.trace(self.guide).get_trace(x)
            return _scores(poutine.replay(self.values, trace=self._draw), x, "ThompsonSampling")

    def act(self, x: torch.Tensor) -> torch.Tensor:
        """``[N]``: the best action of the drawn function for each context."""
        return self.scores(x).argmax(-1)


class EpsilonGreedy:
    """The best action of the expected weights (``guide.median()``), a random one with
    probability ``epsilon``."""

    def __init__(
        self, model: Any, guide: Any, epsilon: float = 0.05, values: Values | None = None, seed: int = 0
    ) -> None:
        if isinstance(epsilon, bool) or not (isinstance(epsilon, int | float) and 0 <= epsilon <= 1):
            raise ValueError(f"EpsilonGreedy: epsilon must be in [0, 1], got {epsilon!r}")
        check_seed(seed, "EpsilonGreedy")
        self.model, self.guide, self.epsilon = model, guide, float(epsilon)
        self.values = _values_of(model, values, "EpsilonGreedy")
        self.generator = torch.Generator().manual_seed(seed)

    def scores(self, x: torch.Tensor) -> torch.Tensor:
        """``[N, actions]``: the scores of the expected weights."""
        x = _checked(x, "EpsilonGreedy")
        _trained(self.guide, "EpsilonGreedy")
        with torch.no_grad(), poutine.block():
            return _scores(poutine.condition(self.values, data=self.guide.median()), x, "EpsilonGreedy")

    def act(self, x: torch.Tensor) -> torch.Tensor:
        scores = self.scores(x)
        n, actions = scores.shape[-2], scores.shape[-1]
        explore = torch.rand(n, generator=self.generator) < self.epsilon  # a CPU generator (seeded):
        random = torch.randint(actions, (n,), generator=self.generator)  # the same draws on any device
        return torch.where(explore.to(scores.device), random.to(scores.device), scores.argmax(-1))
