"""Bayesian layers whose weights are sample sites, and ready-made models."""

from . import functional, masking
from .adapt import broadcast_pyro_layers
from .classifiers import concrete_mlp, small_mlp
from .conv import Conv1d, Conv2d, Conv3d
from .convert import ConvertedModel, from_module
from .converted.own import dropout_off
from .keras_cnn import KerasCNN
from .layers import Linear, prior_scale_from_length_scale
from .lenet import LeNet, length_scale_for, observe_classes
from .models import MLP
from .recurrent import GRU, LSTM

__all__ = [
    "GRU",
    "LSTM",
    "MLP",
    "Conv1d",
    "Conv2d",
    "Conv3d",
    "ConvertedModel",
    "KerasCNN",
    "LeNet",
    "Linear",
    "broadcast_pyro_layers",
    "concrete_mlp",
    "dropout_off",
    "from_module",
    "functional",
    "length_scale_for",
    "masking",
    "observe_classes",
    "prior_scale_from_length_scale",
    "small_mlp",
]
