"""HMC (NUTS) on the same Bayesian network: N(0, 1/l^2) weights, a Gamma prior on tau; split by split."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from pyro_dropout.baselines import run_nuts
from pyro_dropout.nn import MLP
from pyro_dropout.prediction import predict_from_samples

from ..method import GridSetup, Method

__all__ = ["HMCMethod", "HMCOptions"]


@dataclass
class HMCOptions:
    warmup: int = field(default=500, metadata={"minimum": 1, "help": "NUTS warm-up steps"})
    samples: int = field(default=500, metadata={"minimum": 1, "help": "posterior draws kept"})
    max_tree_depth: int = field(default=8, metadata={"minimum": 1, "help": "NUTS's maximum tree depth"})
    length_scale: float = field(default=1.0, metadata={"positive": True, "help": "N(0, 1/l^2) weights"})
    tau_prior: tuple[float, float] = field(
        default=(0.1, 0.01), metadata={"positive": True, "help": "Gamma(shape, rate) prior on tau"}
    )


class HMCMethod(Method):
    options_class = HMCOptions
    prefix = "hmc"

    fits_splits = True

    def fit_split(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        x_test: torch.Tensor,
        setup: GridSetup,
        seed: int,
        scale: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, Any]]:
        o: HMCOptions = self.options
        model = MLP(
            x.shape[1],
            hidden=setup.hidden,
            tau="learned",
            tau_prior=o.tau_prior,
            prior="normal",
            length_scale=o.length_scale,
        )
        samples = run_nuts(model, x, y, o.warmup, o.samples, o.max_tree_depth, seed)
        pred = predict_from_samples(model, samples, x_test, return_sites=())
        extra = {
            "num_posterior_samples": pred.means["obs"].shape[0],
            "tau": float((samples["tau"] / scale.pow(2)).mean()),
        }
        return pred.means["obs"], pred.variances["obs"], extra
