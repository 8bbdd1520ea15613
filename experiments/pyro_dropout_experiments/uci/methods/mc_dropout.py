"""MC dropout (paper 000): a fixed drop probability and precision, both chosen on the validation rows."""

from __future__ import annotations

from typing import Any

from pyro_dropout.guides import DropoutGuide
from pyro_dropout.infer import DropoutELBO

from ..method import BuildContext, GridSetup, Method

__all__ = ["MCDropout"]


class MCDropout(Method):
    """Dropout as variational inference with the ELBO; ``p`` and ``tau`` from the grid."""

    masked = True

    def grid(self, setup: GridSetup) -> list[dict[str, Any]]:
        return [{"p": p, "tau": tau} for p in setup.dropout_rates for tau in setup.tau_values]

    def loss(self, ctx: BuildContext) -> Any:
        return DropoutELBO(per_example_masks=ctx.per_example_masks)

    def build(self, ctx: BuildContext) -> tuple[Any, Any, Any]:
        # tau on the original scale -> precision of the standardised targets: tau * std_y^2
        tau = ctx.per_run("tau") * ctx.target_scale.pow(2)
        model = ctx.network(tau=tau, length_scale=ctx.length_scales())
        p = ctx.per_run("p").reshape(ctx.runs, 1)
        guide = DropoutGuide(model, dropout=p, init_loc_fn=ctx.init_loc_fn)
        return model, guide, self.loss(ctx)
