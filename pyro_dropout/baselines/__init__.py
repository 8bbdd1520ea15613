"""Baselines on the same data: mean-field VI, deep ensembles, exact and sparse GPs and HMC."""

from .ensemble import deep_ensemble, ensemble_predictive, point_estimate_guide
from .gp import fit_gp, gp_predictive
from .hmc import run_nuts
from .mean_field import MeanFieldGuide
from .sparse_gp import fit_sparse_gp

__all__ = [
    "MeanFieldGuide",
    "deep_ensemble",
    "ensemble_predictive",
    "fit_gp",
    "fit_sparse_gp",
    "gp_predictive",
    "point_estimate_guide",
    "run_nuts",
]
