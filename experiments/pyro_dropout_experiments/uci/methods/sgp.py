"""A sparse Gaussian process (Titsias 2009, VFE; ARD squared-exponential kernel), split by split."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from pyro_dropout.baselines import fit_sparse_gp

from ..method import GridSetup, Method

__all__ = ["SparseGPMethod", "SparseGPOptions"]


@dataclass
class SparseGPOptions:
    inducing: int = field(default=50, metadata={"minimum": 1, "help": "inducing points"})
    steps: int = field(default=2000, metadata={"minimum": 1, "help": "Adam steps (lr 0.01) on the VFE bound"})


class SparseGPMethod(Method):
    options_class = SparseGPOptions
    prefix = "sgp"
    layered = False

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
        o: SparseGPOptions = self.options
        gp = fit_sparse_gp(x, y, min(o.inducing, len(x)), o.steps, seed=seed)
        with torch.no_grad():
            mu, var = (t.to(x.dtype) for t in gp(x_test.double(), full_cov=False, noiseless=False))
        # one "draw"
        return mu.unsqueeze(0), var.unsqueeze(0), {"noise_sd": float(gp.noise.detach().sqrt() * scale)}
