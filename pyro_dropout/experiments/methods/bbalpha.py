"""BB-alpha dropout (paper 003, eq. 6-7): MC dropout's network fitted with the BB-alpha energy."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...infer import BBAlpha
from ..core.method import BuildContext, register
from .mc_dropout import MCDropout

__all__ = ["BBAlphaDropout", "BBAlphaOptions"]


@dataclass
class BBAlphaOptions:
    particles: int = field(
        default=10, metadata={"help": "K, the dropout draws per point in the BB-alpha energy", "minimum": 1}
    )


@register("bbalpha-1", summary="BB-alpha dropout, alpha = 1 (paper 003)", alpha=1.0)
@register("bbalpha-0.5", summary="BB-alpha dropout, alpha = 0.5 (paper 003)", alpha=0.5)
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
