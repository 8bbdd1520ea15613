"""The settings of paper 003's MNIST experiments (BB-α, §5.2; adversarial examples, §5.3): what
each adds to :class:`~.settings.MnistSettings`, with the paper's (full) and the quick values."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..core import known_names

__all__ = ["ATTACK_QUICK", "BBALPHA_QUICK", "AlphaSettings", "AttackSettings"]

MODELS = ("mlp", "cnn")


@dataclass(frozen=True)
class AlphaSettings:
    """``pyro-dropout mnist bbalpha``: α = 0 is the dropout ELBO with K particles."""

    alphas: tuple[float, ...] = field(
        default=(0.0, 0.5, 1.0), metadata={"help": "the α values (0: the ELBO)", "minimum": 0}
    )
    repeats: int = field(default=3, metadata={"help": "trainings per model and α", "positive": True})
    dropout: float = field(default=0.5, metadata={"help": "drop probability p", "minimum": 0, "below": 1})
    particles: int = field(default=10, metadata={"help": "mask draws K per training step", "positive": True})
    models: tuple[str, ...] = field(
        default=MODELS,
        metadata={
            "help": "mlp (2x100) and/or cnn (Keras's MNIST CNN)",
            "parse_check": known_names(MODELS, "models"),
        },
    )


@dataclass(frozen=True)
class AttackSettings:
    """``pyro-dropout mnist adversarial``: the networks, and the two attacks of paper 003 §5.3."""

    alphas: tuple[float, ...] = field(
        default=(0.0, 0.5, 1.0), metadata={"help": "the α values of the dropout networks", "minimum": 0}
    )
    dropout: float = field(default=0.5, metadata={"help": "drop probability p", "minimum": 0, "below": 1})
    particles: int = field(default=10, metadata={"help": "mask draws K per training step", "positive": True})
    width: int = field(default=1000, metadata={"help": "units per hidden layer", "positive": True})
    depth: int = field(default=3, metadata={"help": "hidden layers", "positive": True})
    test_samples: int = field(
        default=10, metadata={"help": "draws K_test of the attacked and scored predictive", "positive": True}
    )
    etas: tuple[float, ...] = field(
        default=tuple(round(0.05 * i, 2) for i in range(11)),
        metadata={"help": "step sizes of the untargeted attack", "minimum": 0},
    )
    target: int = field(
        default=0, metadata={"help": "the class of the targeted attack", "minimum": 0, "maximum": 9}
    )
    target_eta: float = field(default=0.01, metadata={"help": "its step size", "positive": True})
    target_steps: int = field(default=50, metadata={"help": "its gradient steps", "positive": True})


# what --quick changes (the MNIST settings and these): each command under 10 minutes on 2 CPU cores
BBALPHA_QUICK: dict[str, Any] = {"epochs": 3.0, "train_size": 10_000, "test_size": 2000, "repeats": 1}
ATTACK_QUICK: dict[str, Any] = {"epochs": 2.0, "train_size": 10_000, "test_size": 500, "target_steps": 20}
