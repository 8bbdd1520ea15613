"""Inference: the dropout ELBO, the BB-alpha energy, and their recorded graphs (``graph=``).

Prediction (``predict`` and the rest) is `pyro_dropout.prediction`.
"""

from .bbalpha import BBAlpha, log_mean_exp
from .compiled_svi import CompiledSVI
from .divergence import DivergenceError
from .elbo import DropoutELBO
from .joint_optim import JointOptim
from .recorded.graph import GraphLoss
from .saved import load_param_store, safe_load

__all__ = [
    "BBAlpha",
    "CompiledSVI",
    "DivergenceError",
    "DropoutELBO",
    "GraphLoss",
    "JointOptim",
    "load_param_store",
    "log_mean_exp",
    "safe_load",
]
