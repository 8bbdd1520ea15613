"""``pyro-dropout active-learning``'s settings: the full and the quick values."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pyro_dropout.metrics import ACQUISITIONS

from ..core import known_names

__all__ = ["CHOICES", "PAPER_FUNCTIONS", "QUICK", "ActiveSettings"]

# the five functions of Gal, Islam & Ghahramani (2017) and BatchBALD (Kirsch et al. 2019)
PAPER_FUNCTIONS = ("bald", "variation_ratios", "max_entropy", "mean_std", "random")
CHOICES = (*ACQUISITIONS, "batch_bald")


@dataclass(frozen=True)
class ActiveSettings:
    """Pool-based acquisition on MNIST, as Gal, Islam & Ghahramani (2017) run it: 20 labelled
    images balanced over the digits, ``k`` acquired per round until ``max_labels``, the network
    retrained from scratch each round (conv 32 4x4, ReLU, conv 32 4x4, ReLU, max-pool 2, dropout
    0.25, dense 128, ReLU, dropout 0.5, dense 10) and scored on the test images by its MC
    predictive. ``copies`` > 1: Kirsch et al. (2019)'s Repeated MNIST, each pool image that many
    times, each copy with Gaussian noise of sd ``noise``."""

    acquisitions: tuple[str, ...] = field(
        default=PAPER_FUNCTIONS,
        metadata={"help": "acquisition functions", "parse_check": known_names(CHOICES, "acquisitions")},
    )
    repeats: int = field(default=3, metadata={"help": "runs per function (seeds)", "positive": True})
    initial: int = field(default=2, metadata={"help": "initial labels of each digit", "positive": True})
    k: int = field(default=10, metadata={"help": "images acquired per round", "positive": True})
    max_labels: int = field(default=1000, metadata={"help": "labelled images at the end", "positive": True})
    pool_size: int | None = field(
        default=None, metadata={"help": "MNIST training images in the pool (default: all)", "positive": True}
    )
    subset: int = field(
        default=2000,
        metadata={"help": "random pool images scored each round (0: the whole pool)", "minimum": 0},
    )
    copies: int = field(
        default=1, metadata={"help": "copies of each pool image (3: Repeated MNIST)", "positive": True}
    )
    noise: float = field(default=0.1, metadata={"help": "sd of the noise added to each copy", "minimum": 0})
    test_size: int | None = field(
        default=None, metadata={"help": "test images scored each round (default: all)", "positive": True}
    )
    num_samples: int = field(
        default=20, metadata={"help": "dropout draws T for scoring and testing", "minimum": 2}
    )
    epochs: int = field(
        default=50, metadata={"help": "passes over the labelled images a round", "positive": True}
    )
    steps: int = field(
        default=0,
        metadata={
            "help": "optimiser steps a round at the least: passes are added until a round has taken "
            "that many (0: --epochs alone)",
            "minimum": 0,
        },
    )
    weight_decay: float = field(
        default=0.0,
        metadata={
            "help": "c > 0: the first dense layer's prior set to the authors' Keras weight decay, "
            "c/N times its squared weights per image (their script: 3.5); 0: length-scale sqrt(0.1)",
            "minimum": 0,
        },
    )
    batch_size: int = field(default=128, metadata={"help": "minibatch size", "positive": True})
    lr: float = field(default=1e-3, metadata={"help": "Adam's learning rate", "positive": True})
    warm: bool = field(default=False, metadata={"help": "go on from the last round's network"})
    seed: int = field(default=0, metadata={"help": "seed of the first run", "minimum": 0})


# what --quick changes: one run each, to 150 labels, a smaller pool subset and test set (minutes)
QUICK: dict[str, Any] = {"repeats": 1, "max_labels": 150, "subset": 500, "test_size": 1000}
