"""The settings every MNIST experiment shares, with the paper's (full) and the quick values."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

__all__ = ["OOD_QUICK", "QUICK", "MnistSettings"]


@dataclass(frozen=True)
class MnistSettings:
    """Training and scoring of the MNIST experiments (full: paper 000 §5.2's LeNet on all of MNIST)."""

    epochs: float = field(
        default=20.0, metadata={"help": "passes over the training images", "positive": True}
    )
    train_size: int | None = field(
        default=None, metadata={"help": "training images (default: all but validation)", "positive": True}
    )
    test_size: int | None = field(
        default=None, metadata={"help": "test images of each set (default: all)", "positive": True}
    )
    validation: int = field(
        default=5000, metadata={"help": "training images held out for validation", "positive": True}
    )
    num_samples: int = field(default=100, metadata={"help": "stochastic forward passes T", "positive": True})
    batch_size: int = field(default=256, metadata={"help": "minibatch size", "positive": True})
    lr: float = field(default=1e-3, metadata={"help": "Adam's learning rate", "positive": True})
    ensemble_size: int = field(
        default=5, metadata={"help": "networks in the deep ensemble (ood)", "positive": True}
    )
    seed: int = field(
        default=0, metadata={"help": "seed of the split, initialisation and masks", "minimum": 0}
    )


# what --quick changes (rotated, concrete): each command within core.QUICK_BUDGET
QUICK: dict[str, Any] = {"epochs": 5.0, "num_samples": 50, "ensemble_size": 3}
# ood trains seven networks (LeNet with MC and Concrete dropout, an ensemble of 3): 2 epochs
# each keep it within the budget (5 took over 15 minutes: docs/performance.md#quick-settings)
OOD_QUICK: dict[str, Any] = QUICK | {"epochs": 2.0}


def quick(settings: MnistSettings) -> MnistSettings:
    return replace(settings, **QUICK)
