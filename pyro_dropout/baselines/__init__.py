"""Baselines on the same data: mean-field VI, deep ensembles, a sparse GP and HMC."""

from .hmc import run_nuts
from .mean_field import MeanFieldGuide
from .sparse_gp import fit_sparse_gp

__all__ = ["MeanFieldGuide", "fit_sparse_gp", "run_nuts"]
