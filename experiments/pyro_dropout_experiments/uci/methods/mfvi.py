"""Mean-field Gaussian VI (Graves 2011), the "VI" column of paper 000's Table 1: N(0, 1/l^2)
weight priors, a diagonal Gaussian posterior with analytic KL, tau chosen on the validation rows."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pyro_dropout.baselines import MeanFieldGuide
from pyro_dropout.infer import DropoutELBO

from ..method import BuildContext, GridSetup, Method

__all__ = ["MeanFieldOptions", "MeanFieldVI"]


@dataclass
class MeanFieldOptions:
    length_scale: float = field(
        default=1.0, metadata={"positive": True, "help": "prior length-scale l: N(0, 1/l^2) weights"}
    )


class MeanFieldVI(Method):
    options_class = MeanFieldOptions
    prefix = "mfvi"

    def grid(self, setup: GridSetup) -> list[dict[str, Any]]:
        return [{"tau": tau} for tau in setup.tau_values]

    def build(self, ctx: BuildContext) -> tuple[Any, Any, Any]:
        tau = ctx.per_run("tau") * ctx.target_scale.pow(2)
        model = ctx.network(tau=tau, prior="normal", length_scale=self.options.length_scale)
        return model, MeanFieldGuide(model, init_loc_fn=ctx.init_loc_fn), DropoutELBO()
