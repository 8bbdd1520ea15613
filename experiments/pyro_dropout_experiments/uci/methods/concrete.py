r"""Concrete dropout (paper 001): the drop probabilities learned per layer; the prior length-scale
and the precision the network trains under chosen on the validation rows; the final precision set
by an M-step (appendix D), by default on the validation rows.

The default, in full:

1. Grid stage, on 80% of the training rows: each length-scale l and each held precision of the
   standardised targets, ``tau_grid`` (1, 10, 100: the noise taken as all, a tenth or a
   hundredth of the target variance). The network and the rates train with tau held (the
   E-step of the paper's EM, taken to its limit). Then tau is measured on the validation rows:
   the value maximising their predictive log-likelihood (``tau_held_out``).
2. The grid point with the best validation log-likelihood is chosen.
3. Final fit, on all the training rows: the chosen l and held tau, then tau set to the chosen
   point's ``tau_held_out``, never to a value from the test rows.

Why not learn tau by MAP while training (``tau="map"``)? With a weak prior it climbs with the
fit and pushes the rates towards zero: Boston's networks nearly interpolate their training rows.
Why not hold it at one value? The value that suits noisy data (1, on Boston) starves a
near-noiseless target of its data term: its RMSE was 40-50% above MC
dropout. docs/uci.md gives the measurements."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, cast

import torch

from pyro_dropout.guides import DropoutGuide, init_sites_to
from pyro_dropout.infer import DropoutELBO
from pyro_dropout.prediction import predict

from ...core import held_out_tau, m_step_tau
from ..method import AfterTraining, BuildContext, GridSetup, Method

__all__ = ["ConcreteDropoutMethod", "ConcreteOptions"]


@dataclass
class ConcreteOptions:
    tau: str = field(
        default="em",
        metadata={
            "choices": ("em", "map"),
            "help": "the precision while the network trains: held at each value of --concrete-tau-grid, "
            "chosen on the validation rows (em), or learned by MAP from --concrete-tau-init (map); "
            "then the final M-step",
        },
    )
    tau_grid: tuple[float, ...] = field(
        default=(1.0, 10.0, 100.0),
        metadata={
            "positive": True,
            "help": "em: the held precisions of the standardised targets tried on the validation rows "
            "(1/tau the noise's share of the target variance: all of it, a tenth, a hundredth); "
            "empty: --concrete-tau-init alone",
        },
    )
    tau_init: float | None = field(
        default=1.0,
        metadata={
            "positive": True,
            "help": "the starting (map) precision of the standardised targets, or the held one (em) "
            "when --concrete-tau-grid is empty",
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
    m_step_rows: str = field(
        default="validation",
        metadata={
            "choices": ("validation", "training"),
            "help": "the rows of the final M-step: the grid's validation rows (tau maximising their "
            "predictive log-likelihood, carried into the network retrained on all the training rows) "
            "or the training rows (the closed form of paper 001, appendix D)",
        },
    )

    def __post_init__(self) -> None:
        if self.tau == "em" and not self.tau_grid and self.tau_init is None:
            raise ValueError("concrete tau='em' with an empty tau_grid holds tau at tau_init, which is None")


class ConcreteDropoutMethod(Method):
    masked = True
    options_class = ConcreteOptions
    prefix = "concrete"

    def grid(self, setup: GridSetup) -> list[dict[str, Any]]:
        o: ConcreteOptions = self.options
        if o.tau != "em":
            return [{"length_scale": length} for length in o.length_scales]
        held = o.tau_grid or (o.tau_init,)
        return [{"length_scale": length, "tau_train": t} for length in o.length_scales for t in held]

    def build(self, ctx: BuildContext) -> tuple[Any, Any, Any]:
        o: ConcreteOptions = self.options
        length_scale = ctx.length_scales()
        per_layer = [length_scale * math.sqrt(k) for k in ctx.fan_in]  # K_in of each weight layer
        held = o.tau == "em"
        tau: Any = "learned"
        if held:  # each run's held precision of the standardised targets (its grid value)
            values = [h.get("tau_train", o.tau_init) for h in ctx.hyper]
            tau = ctx.per_run_values([float(cast(float, v)) for v in values])
        model = ctx.network(
            tau=tau, tau_prior=o.tau_prior, length_scale=per_layer if o.scale_by_fan_in else length_scale
        )
        init = torch.full((ctx.runs, 1), 0.1, device=ctx.device)  # one learned rate per run and layer
        init_loc_fn = ctx.init_loc_fn
        if o.tau_init is not None and not held:
            init_loc_fn = init_sites_to({"tau": float(o.tau_init)}, fallback=init_loc_fn)
        guide = DropoutGuide(model, concrete=True, init_dropout=init, init_loc_fn=init_loc_fn)
        return model, guide, DropoutELBO(per_example_masks=ctx.per_example_masks)

    def carried(self) -> tuple[str, ...]:
        return ("tau_held_out",) if self.options.m_step_rows == "validation" else ()

    def after_training(self, model: Any, guide: Any, rows: AfterTraining) -> dict[str, Any]:
        r"""The final M-step: each run's ``tau`` set from its fit (see :func:`m_step_tau` and
        :func:`held_out_tau`).

        - ``m_step_rows="training"``, or no validation rows and none carried: the closed form on
          the training rows (paper 001, appendix D).
        - ``"validation"``, in the grid stage: the value maximising the validation rows'
          predictive log-likelihood, recorded as ``tau_held_out`` (original scale).
        - ``"validation"``, in the final fit: the chosen grid point's ``tau_held_out``.

        The validation rows then score a tau fitted on them. The score only ranks the grid
        points, and they all get the same treatment.

        Returns the values before the M-step (``tau_before_m_step``, original scale)."""
        scale2 = rows.target_scale.pow(2)
        before = _tau_of(model, guide).clone()
        record: dict[str, Any] = {"tau_before_m_step": (before / scale2.to(before)).tolist()}
        carried = [h.get("tau_held_out") for h in rows.hyper]
        if self.options.m_step_rows == "validation" and rows.held_out is not None:
            means = self._means(model, guide, rows.held_out[0], rows.chunk)
            tau = held_out_tau(means, rows.held_out[1], m_step_tau(means, rows.held_out[1], (1.0, 0.0)))
            record["tau_held_out"] = (tau / scale2.to(tau)).tolist()
        elif self.options.m_step_rows == "validation" and all(t is not None for t in carried):
            tau = torch.tensor(carried, dtype=before.dtype, device=before.device) * scale2.to(before)
        else:
            tau = m_step_tau(self._means(model, guide, rows.x, rows.chunk), rows.y, self.options.tau_prior)
        _set_tau(model, guide, tau)
        return record

    def _means(self, model: Any, guide: Any, x: torch.Tensor, chunk: int) -> torch.Tensor:
        """The network's outputs under ``m_step_draws`` dropout draws, ``[T, R, n]``."""
        draws = self.options.m_step_draws
        return predict(model, guide, x, num_samples=draws, chunk_size=chunk, return_sites=()).means["obs"]

    def learned(self, model: Any, guide: Any, target_scale: torch.Tensor) -> dict[str, Any]:
        rates = {k: v.reshape(-1).tolist() for k, v in guide.dropout_rates().items()}
        tau_norm = _tau_of(model, guide)
        tau = (tau_norm / target_scale.to(tau_norm).pow(2)).tolist()  # back to the original scale
        return {"learned_p": [{k: v[r] for k, v in rates.items()} for r in range(len(tau))], "tau": tau}


def _set_tau(model: Any, guide: Any, tau: torch.Tensor) -> None:
    """Set each run's precision of the standardised targets: the MAP parameter or the held value."""
    with torch.no_grad():
        if model.tau_learned:
            param = guide.locs.tau_unconstrained
            positive = torch.distributions.biject_to(torch.distributions.constraints.positive)
            param.copy_(positive.inv(tau.reshape(param.shape).to(param)))
        else:  # held during training (tau="em")
            model.fixed_tau.copy_(tau.reshape(model.fixed_tau.shape))


def _tau_of(model: Any, guide: Any) -> torch.Tensor:
    """Each run's precision of the standardised targets, ``[R]``: MAP estimate or held value."""
    return (guide.median()["tau"] if model.tau_learned else model.fixed_tau).reshape(-1)
