"""``pyro-dropout dynamics``'s settings: the full and the quick values."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..core import known_names

__all__ = ["AGENTS", "QUICK", "DynamicsSettings"]

AGENTS = ("concrete", "fixed")


@dataclass(frozen=True)
class DynamicsSettings:
    """Paper 001 §4.5 on gymnasium's CartPole: a dropout dynamics model (3 weight layers, as in
    Gal, McAllister & Rasmussen's Deep PILCO) refitted after every episode, with Concrete dropout
    (``concrete``, p learned per layer) or p fixed at ``dropout`` (``fixed``, that paper's
    setting). The agent plans with one function drawn per episode."""

    agents: tuple[str, ...] = field(
        default=AGENTS, metadata={"help": "agents", "parse_check": known_names(AGENTS, "agents")}
    )
    episodes: int = field(default=40, metadata={"help": "episodes after the random ones", "positive": True})
    random_episodes: int = field(
        default=2, metadata={"help": "episodes of random actions first", "positive": True}
    )
    steps: int = field(default=100, metadata={"help": "longest episode", "positive": True})
    hidden: int = field(
        default=200, metadata={"help": "units of each of the two hidden layers", "positive": True}
    )
    dropout: float = field(
        default=0.1,
        metadata={
            "help": "p of every layer (fixed), the starting p (concrete)",
            "positive": True,
            "maximum": 0.9,
        },
    )
    length_scale: float = field(default=1e-2, metadata={"help": "prior length-scale", "positive": True})
    train_steps: int = field(
        default=500, metadata={"help": "minibatches after each episode", "positive": True}
    )
    batch_size: int = field(default=100, metadata={"help": "minibatch size", "positive": True})
    lr: float = field(default=1e-3, metadata={"help": "Adam's learning rate", "positive": True})
    validation: float = field(
        default=0.1, metadata={"help": "share of the transitions held out", "positive": True, "maximum": 0.5}
    )
    draws: int = field(
        default=100, metadata={"help": "MC draws for the epistemic uncertainty", "positive": True}
    )
    candidates: int = field(
        default=100, metadata={"help": "action sequences the planner tries", "positive": True}
    )
    horizon: int = field(default=15, metadata={"help": "steps the planner looks ahead", "positive": True})
    repeats: int = field(default=3, metadata={"help": "runs per agent (seeds)", "positive": True})
    seed: int = field(default=0, metadata={"help": "seed of the first run", "minimum": 0})


# what --quick changes: fewer episodes and a shorter refit (minutes on 2 CPU cores)
QUICK: dict[str, Any] = {"episodes": 15, "train_steps": 300, "repeats": 1}
