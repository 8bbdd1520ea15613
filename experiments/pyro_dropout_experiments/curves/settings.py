"""The one-dimensional regression experiments' settings: the papers' (full) and the quick values."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..core.command import check_device

__all__ = ["QUICK", "CurveSettings"]


@dataclass(frozen=True)
class CurveSettings:
    """Training and prediction of the one-dimensional fits (full: paper 000 §5.1, 5 hidden layers
    of 1024 units; ``synthetic`` uses 3 of them, as paper 001 §4.1)."""

    width: int = field(default=1024, metadata={"help": "units per hidden layer", "positive": True})
    layers: int = field(default=5, metadata={"help": "hidden layers", "positive": True})
    steps: int = field(default=20000, metadata={"help": "Adam steps of each network", "positive": True})
    lr: float = field(default=1e-3, metadata={"help": "Adam's learning rate", "positive": True})
    length_scale: float = field(
        default=1e-2, metadata={"help": "prior length-scale l of the weights", "positive": True}
    )
    num_samples: int = field(
        default=1000, metadata={"help": "stochastic forward passes T (paper 000: 1000)", "positive": True}
    )
    gp_steps: int = field(
        default=1000, metadata={"help": "Adam steps of the GP's hyper-parameters", "positive": True}
    )
    seed: int = field(default=0, metadata={"help": "seed of the initialisation and masks", "minimum": 0})
    device: str = field(default="cpu", metadata={"help": "cpu or cuda", "parse_check": check_device})


# what --quick changes: narrower, shallower networks and fewer steps (minutes on 2 CPU cores)
QUICK: dict[str, Any] = {"width": 256, "layers": 4, "steps": 3000, "num_samples": 200, "gp_steps": 500}
