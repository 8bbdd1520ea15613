"""The built-in UCI methods, one file each, named in `pyro_dropout_experiments.uci.registry`.

This face exports their classes and options; the registry imports a method's own module only
when that method is asked for.
"""

from .bbalpha import BBAlphaDropout, BBAlphaOptions
from .concrete import ConcreteDropoutMethod, ConcreteOptions
from .ensemble import DeepEnsembleMethod, EnsembleOptions
from .hmc import HMCMethod, HMCOptions
from .mc_dropout import MCDropout
from .mfvi import MeanFieldOptions, MeanFieldVI
from .nn_p0 import NoDropout
from .sgp import SparseGPMethod, SparseGPOptions

__all__ = [
    "BBAlphaDropout",
    "BBAlphaOptions",
    "ConcreteDropoutMethod",
    "ConcreteOptions",
    "DeepEnsembleMethod",
    "EnsembleOptions",
    "HMCMethod",
    "HMCOptions",
    "MCDropout",
    "MeanFieldOptions",
    "MeanFieldVI",
    "NoDropout",
    "SparseGPMethod",
    "SparseGPOptions",
]
