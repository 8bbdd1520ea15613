"""BB-alpha dropout (paper 003, eq. 6-7): MC dropout's network fitted with the BB-alpha energy."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pyro_dropout.infer import BBAlpha

from ..method import BuildContext
from .mc_dropout import MCDropout

__all__ = ["BBAlphaDropout", "BBAlphaOptions"]


@dataclass
class BBAlphaOptions:
    particles: int = field(
        default=10, metadata={"help": "K, the dropout draws per point in the BB-alpha energy", "minimum": 1}
    )


class BBAlphaDropout(MCDropout):
    """``p`` and ``tau`` from the grid, as MC dropout; the loss is BB-alpha with ``alpha`` fixed
    by the registered name."""

    options_class = BBAlphaOptions
    prefix = "bbalpha"

    def particles(self) -> int:
        return int(self.options.particles)

    def loss(self, ctx: BuildContext) -> Any:
        alpha = float(self.presets["alpha"])
        return BBAlpha(alpha, num_particles=self.particles(), per_example_masks=ctx.per_example_masks)
