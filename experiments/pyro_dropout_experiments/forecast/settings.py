"""``pyro-dropout forecast``'s settings: the full and the quick values."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["QUICK", "ForecastSettings"]


@dataclass(frozen=True)
class ForecastSettings:
    """An LSTM with variational dropout forecasting the monthly CO2 increments."""

    every: int = field(
        default=4, metadata={"help": "keep every k-th weekly reading (4: about monthly)", "positive": True}
    )
    window: int = field(
        default=39, metadata={"help": "past increments the network reads (39: 3 years)", "positive": True}
    )
    horizon: int = field(
        default=130, metadata={"help": "steps forecast after the training end (10 years)", "positive": True}
    )
    train_end: float = field(
        default=1991.0, metadata={"help": "the year the training readings end", "positive": True}
    )
    validation: float = field(
        default=0.1,
        metadata={"help": "share of the latest training windows held out to set the noise", "positive": True},
    )
    hidden: int = field(default=32, metadata={"help": "LSTM units", "positive": True})
    layers: int = field(default=1, metadata={"help": "stacked LSTM layers", "positive": True})
    dropout: float = field(
        default=0.1,
        metadata={"help": "drop probability of inputs, hidden units and read-out", "minimum": 0, "below": 1},
    )
    length_scale: float = field(
        default=1e-2, metadata={"help": "prior length-scale l of the weights", "positive": True}
    )
    steps: int = field(default=6000, metadata={"help": "Adam steps", "positive": True})
    batch_size: int = field(default=64, metadata={"help": "windows per minibatch", "positive": True})
    lr: float = field(default=1e-3, metadata={"help": "Adam's learning rate", "positive": True})
    num_samples: int = field(
        default=500, metadata={"help": "function draws T of the forecast", "positive": True}
    )
    seed: int = field(
        default=0, metadata={"help": "seed of the initialisation, masks and draws", "minimum": 0}
    )


# what --quick changes: fewer steps and draws (about 2 minutes on 2 CPU cores)
QUICK: dict[str, Any] = {"steps": 2000, "num_samples": 200}
