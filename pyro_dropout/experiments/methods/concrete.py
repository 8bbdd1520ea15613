r"""Concrete dropout (paper 001): the drop probabilities learned per layer, the length-scale chosen
on the validation rows, and the precision set by a final M-step (appendix D)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import partial
from typing import Any, cast

import torch

from ...guides import DropoutGuide
from ...infer import DropoutELBO, predict
from ..core.method import BuildContext, GridSetup, Method, register

__all__ = ["ConcreteDropoutMethod", "ConcreteOptions"]


@dataclass
class ConcreteOptions:
    tau: str = field(
        default="em",
        metadata={
            "choices": ("em", "map"),
            "help": "the precision: held at --concrete-tau-init while the network trains, then set by "
            "the final M-step (em), or learned by MAP from there, then the final M-step (map)",
        },
    )
    tau_init: float | None = field(
        default=1.0,
        metadata={
            "positive": True,
            "help": "the held (em) or starting (map) precision of the standardised targets",
        },
    )
    tau_prior: tuple[float, float] = field(
        default=(0.1, 0.01),
        metadata={"positive": True, "help": "Gamma(shape, rate) prior on tau (standardised)"},
    )
    length_scales: tuple[float, ...] = field(
        default=(1e-2, 1e-1, 1.0),
        metadata={"positive": True, "help": "prior length-scales l chosen on the validation rows"},
    )
    scale_by_fan_in: bool = field(
        default=True, metadata={"help": "a layer with K_in inputs gets l * sqrt(K_in) (paper 001's rule)"}
    )
    m_step_draws: int = field(
        default=200, metadata={"minimum": 1, "help": "dropout draws of the final M-step"}
    )

    def __post_init__(self) -> None:
        if self.tau == "em" and self.tau_init is None:
            raise ValueError("concrete tau='em' holds tau at tau_init, which is None")


def _tau_or(site: dict[str, Any], value: float, fallback: Any) -> torch.Tensor:
    if site["name"] == "tau":
        fn = site["fn"]
        return torch.full(fn.batch_shape + fn.event_shape, value, dtype=fn.mean.dtype, device=fn.mean.device)
    return fallback(site)


@register("concrete", summary="Concrete dropout: p learned per layer, l on the validation rows (paper 001)")
class ConcreteDropoutMethod(Method):
    masked = True
    options_class = ConcreteOptions
    prefix = "concrete"

    def grid(self, setup: GridSetup) -> list[dict[str, Any]]:
        return [{"length_scale": length} for length in self.options.length_scales]

    def build(self, ctx: BuildContext) -> tuple[Any, Any, Any]:
        o: ConcreteOptions = self.options
        length_scale = ctx.length_scales()
        per_layer = [length_scale * math.sqrt(k) for k in ctx.fan_in]  # K_in of each weight layer
        held = o.tau == "em"
        tau: Any = (
            torch.full((ctx.runs,), float(cast(float, o.tau_init)), device=ctx.device) if held else "learned"
        )
        model = ctx.network(
            tau=tau, tau_prior=o.tau_prior, length_scale=per_layer if o.scale_by_fan_in else length_scale
        )
        init = torch.full((ctx.runs, 1), 0.1, device=ctx.device)  # one learned rate per run and layer
        init_loc_fn = ctx.init_loc_fn
        if o.tau_init is not None and not held:
            init_loc_fn = partial(_tau_or, value=float(o.tau_init), fallback=init_loc_fn)
        guide = DropoutGuide(model, concrete=True, init_dropout=init, init_loc_fn=init_loc_fn)
        return model, guide, DropoutELBO(per_example_masks=ctx.per_example_masks)

    def after_training(
        self, model: Any, guide: Any, x: torch.Tensor, y: torch.Tensor, target_scale: torch.Tensor, chunk: int
    ) -> dict[str, Any]:
        r"""The final M-step (paper 001, appendix D) in closed form: for
        :math:`y \sim \mathcal{N}(f(x), \tau^{-1})`, :math:`\tau \sim \mathrm{Gamma}(a, b)`,
        :math:`\tau^* = (a - 1 + N/2) / (b + \tfrac12 \sum_n \mathbb{E}_q (y_n - f(x_n))^2)`,
        the expectation over ``m_step_draws`` dropout draws. Sets each run's ``tau`` to
        :math:`\tau^*`; returns the values before (``tau_before_m_step``, on the original scale)."""
        a, b = self.options.tau_prior
        pred = predict(
            model, guide, x, num_samples=self.options.m_step_draws, chunk_size=chunk, return_sites=()
        )
        sse = (pred.means["obs"] - y).pow(2).mean(0).sum(-1)  # [R]: sum over points of E_q (y - f)^2
        tau_star = (a - 1 + y.shape[-1] / 2) / (b + sse / 2)
        before = _tau_of(model, guide).clone()
        with torch.no_grad():
            if model.tau_learned:
                param = guide.locs.tau_unconstrained
                positive = torch.distributions.biject_to(torch.distributions.constraints.positive)
                param.copy_(positive.inv(tau_star.reshape(param.shape).to(param)))
            else:  # held during training (tau="em")
                model.fixed_tau.copy_(tau_star.reshape(model.fixed_tau.shape))
        return {"tau_before_m_step": (before / target_scale.to(before).pow(2)).tolist()}

    def learned(self, model: Any, guide: Any, target_scale: torch.Tensor) -> dict[str, Any]:
        rates = {k: v.reshape(-1).tolist() for k, v in guide.dropout_rates().items()}
        tau_norm = _tau_of(model, guide)
        tau = (tau_norm / target_scale.to(tau_norm).pow(2)).tolist()  # back to the original scale
        return {"learned_p": [{k: v[r] for k, v in rates.items()} for r in range(len(tau))], "tau": tau}


def _tau_of(model: Any, guide: Any) -> torch.Tensor:
    """Each run's precision of the standardised targets, ``[R]``: MAP estimate or held value."""
    return (guide.median()["tau"] if model.tau_learned else model.fixed_tau).reshape(-1)
