"""The demo's settings, with its quick values."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..core.command import check_device

__all__ = ["QUICK", "DemoSettings"]


@dataclass(frozen=True)
class DemoSettings:
    """MC dropout (or BB-α) on the built-in 1-d data: a 1-64-64-1 ReLU network."""

    steps: int = field(default=3000, metadata={"help": "SVI steps", "minimum": 1})
    num_samples: int = field(default=500, metadata={"help": "MC-dropout draws for the figures", "minimum": 1})
    seed: int = field(
        default=0,
        metadata={"help": "seed of the data, weights and masks", "minimum": 0, "maximum": 2**63 - 1},
    )
    loss: str = field(
        default="elbo", metadata={"help": "DropoutELBO or BBAlpha(0.5)", "choices": ("elbo", "bbalpha")}
    )
    device: str = field(default="cpu", metadata={"help": "cpu or cuda", "parse_check": check_device})


# what --quick changes: a third of the steps, fewer draws
QUICK: dict[str, Any] = {"steps": 1000, "num_samples": 200}
