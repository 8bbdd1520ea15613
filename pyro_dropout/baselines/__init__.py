"""Baselines on the same data: mean-field VI, deep ensembles, a sparse GP and HMC."""

from .ensemble import deep_ensemble, ensemble_predictive, point_estimate_guide
from .hmc import run_nuts
from .mean_field import MeanFieldGuide
from .sparse_gp import fit_sparse_gp

__all__ = [
    "MeanFieldGuide",
    "deep_ensemble",
    "ensemble_predictive",
    "fit_sparse_gp",
    "point_estimate_guide",
    "run_nuts",
]
