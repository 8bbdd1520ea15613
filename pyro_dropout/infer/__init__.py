"""Inference: the dropout ELBO, the BB-alpha energy, and SVI's fast paths.

Prediction (``predict`` and the rest) is `pyro_dropout.prediction`.
"""

from .bbalpha import BBAlpha, log_mean_exp
from .compiled_svi import CompiledSVI
from .divergence import DivergenceError
from .elbo import DropoutELBO
from .fast.jit_loss import JitLoss
from .fast.spot_check import StaleTraceError
from .joint_optim import JointOptim

__all__ = [
    "BBAlpha",
    "CompiledSVI",
    "DivergenceError",
    "DropoutELBO",
    "JitLoss",
    "JointOptim",
    "StaleTraceError",
    "log_mean_exp",
]
