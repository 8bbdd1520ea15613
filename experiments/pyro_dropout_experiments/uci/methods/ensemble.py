"""Deep ensembles (Lakshminarayanan et al. 2017): networks with mean and variance heads, trained
by MAP without dropout; the members' predictions form an equally weighted mixture."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pyro_dropout.baselines import point_estimate_guide
from pyro_dropout.infer import DropoutELBO

from ..method import BuildContext, GridSetup, Method

__all__ = ["DeepEnsembleMethod", "EnsembleOptions"]


@dataclass
class EnsembleOptions:
    size: int = field(default=5, metadata={"minimum": 1, "help": "members of each ensemble"})
    # MAP training of mean/variance heads without early stopping overfits the variance: the
    # number of epochs is chosen on the validation rows, as fractions of the protocol's epochs
    epoch_fractions: tuple[float, ...] = field(
        default=(0.01, 0.025, 0.05, 0.1, 0.25, 1.0),
        metadata={"positive": True, "help": "fractions of the epochs tried on the validation rows"},
    )


class DeepEnsembleMethod(Method):
    options_class = EnsembleOptions
    prefix = "ensemble"

    def members(self) -> int:
        return int(self.options.size)

    def grid(self, setup: GridSetup) -> list[dict[str, Any]]:
        full = setup.epochs
        epochs = sorted({max(1, round(f * full)) for f in self.options.epoch_fractions})
        return [{"epochs": e} for e in epochs]

    def build(self, ctx: BuildContext) -> tuple[Any, Any, Any]:
        model = ctx.network(likelihood="heteroscedastic", length_scale=ctx.length_scale)
        return model, point_estimate_guide(model, ctx.init_loc_fn), DropoutELBO()
