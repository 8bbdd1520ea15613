"""``pyro-dropout rl``'s settings: the full and the quick values."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..core import known_names

__all__ = ["POLICIES", "QUICK", "RLSettings"]

POLICIES = ("thompson", "epsilon-greedy")


@dataclass(frozen=True)
class RLSettings:
    """A DQN on a gymnasium task, as paper 000 §5.4 trains its Q-networks: ``thompson`` is the
    network with p = 0.1 before every weight layer (the state's: ``input_dropout``), acting on one
    dropout draw per step and trained on one draw per minibatch; ``epsilon-greedy`` is the same
    network without dropout, ε annealed from 1 to ``epsilon``."""

    env: str = field(default="CartPole-v1", metadata={"help": "gymnasium task (discrete actions)"})
    policies: tuple[str, ...] = field(
        default=POLICIES, metadata={"help": "policies", "parse_check": known_names(POLICIES, "policies")}
    )
    batches: int = field(
        default=30_000, metadata={"help": "training batches (one per environment step)", "positive": True}
    )
    repeats: int = field(default=3, metadata={"help": "runs per policy (seeds)", "positive": True})
    burn_in: int = field(default=500, metadata={"help": "random moves before training", "minimum": 0})
    hidden: int = field(
        default=50, metadata={"help": "units of each of the two hidden layers", "positive": True}
    )
    dropout: float = field(
        default=0.1,
        metadata={
            "help": "drop probability before every weight layer (thompson)",
            "minimum": 0,
            "maximum": 0.95,
        },
    )
    input_dropout: float = field(
        default=0.1,
        metadata={
            "help": "drop probability of the state's components (thompson)",
            "minimum": 0,
            "maximum": 0.95,
        },
    )
    epsilon: float = field(
        default=0.05, metadata={"help": "final exploration rate", "minimum": 0, "maximum": 1}
    )
    anneal: float = field(
        default=0.1,
        metadata={
            "help": "fraction of the batches over which ε falls from 1",
            "positive": True,
            "maximum": 1,
        },
    )
    gamma: float = field(default=0.99, metadata={"help": "discount", "positive": True, "maximum": 1})
    batch_size: int = field(default=64, metadata={"help": "replayed transitions per batch", "positive": True})
    buffer: int = field(
        default=50_000, metadata={"help": "replay capacity (also the prior's data size)", "positive": True}
    )
    target_every: int = field(
        default=500, metadata={"help": "batches between target-network copies", "positive": True}
    )
    lr: float = field(default=1e-3, metadata={"help": "Adam's learning rate", "positive": True})
    seed: int = field(default=0, metadata={"help": "seed of the first run", "minimum": 0})


# what --quick changes: one run of each policy, a third of the batches (minutes on 2 CPU cores)
QUICK: dict[str, Any] = {"batches": 10_000, "repeats": 1}
