"""Inference: the dropout ELBO, the BB-alpha energy, and prediction helpers."""

from .bbalpha import BBAlpha, log_mean_exp
from .collect import DRAWS_PLATE
from .compiled_svi import CompiledSVI
from .divergence import DivergenceError
from .elbo import DropoutELBO, log_likelihood_sum
from .inputs import check_finite_inputs
from .jit_loss import JitLoss
from .joint_optim import JointOptim
from .predictions import Predictions
from .predictive import predict, predict_chunks, predict_from_samples, predict_standard
from .traces import importance_trace, latent_penalty

__all__ = [
    "DRAWS_PLATE",
    "BBAlpha",
    "CompiledSVI",
    "DivergenceError",
    "DropoutELBO",
    "JitLoss",
    "JointOptim",
    "Predictions",
    "check_finite_inputs",
    "importance_trace",
    "latent_penalty",
    "log_likelihood_sum",
    "log_mean_exp",
    "predict",
    "predict_chunks",
    "predict_from_samples",
    "predict_standard",
]
