"""``pyro-dropout bandit``'s settings: the full and the quick values."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..core import known_names

__all__ = ["POLICIES", "QUICK", "BanditSettings"]

POLICIES = ("mc-dropout", "concrete", "epsilon-greedy", "uniform")


@dataclass(frozen=True)
class BanditSettings:
    """The wheel bandit and the learners (Riquelme et al. 2018's dropout baseline: 2x50 ReLU,
    keep probability 0.8, retrained every 50 rounds for 100 minibatches of 512)."""

    deltas: tuple[float, ...] = field(
        default=(0.5, 0.7, 0.9, 0.95), metadata={"help": "wheel radii δ", "positive": True}
    )
    rounds: int = field(default=2000, metadata={"help": "contexts per run", "positive": True})
    repeats: int = field(default=3, metadata={"help": "runs per δ and policy (seeds)", "positive": True})
    policies: tuple[str, ...] = field(
        default=POLICIES, metadata={"help": "policies", "parse_check": known_names(POLICIES, "policies")}
    )
    hidden: int = field(
        default=50, metadata={"help": "units of each of the two hidden layers", "positive": True}
    )
    dropout: float = field(
        default=0.2,
        metadata={"help": "drop probability (mc-dropout, epsilon-greedy)", "minimum": 0, "below": 1},
    )
    epsilon: float = field(
        default=0.05, metadata={"help": "exploration rate of epsilon-greedy", "minimum": 0, "maximum": 1}
    )
    train_every: int = field(default=50, metadata={"help": "rounds between trainings", "positive": True})
    train_steps: int = field(default=100, metadata={"help": "minibatches per training", "positive": True})
    batch_size: int = field(default=512, metadata={"help": "minibatch size", "positive": True})
    lr: float = field(default=1e-3, metadata={"help": "Adam's learning rate", "positive": True})
    seed: int = field(default=0, metadata={"help": "seed of the first run", "minimum": 0})


# what --quick changes: fewer rounds and one run each (minutes on 2 CPU cores)
QUICK: dict[str, Any] = {"rounds": 800, "repeats": 1}
