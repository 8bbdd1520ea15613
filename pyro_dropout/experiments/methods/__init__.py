"""The registered methods, one file each; importing this package registers them all.

The order of the imports below is the order of registration, which is the order of the
command line's choices and of the tables' columns.
"""

# isort: skip_file
from .mc_dropout import MCDropout
from .concrete import ConcreteDropoutMethod, ConcreteOptions, held_out_tau, m_step_tau
from .bbalpha import BBAlphaDropout, BBAlphaOptions
from .mfvi import MeanFieldOptions, MeanFieldVI
from .ensemble import DeepEnsembleMethod, EnsembleOptions
from .sgp import SparseGPMethod, SparseGPOptions
from .hmc import HMCMethod, HMCOptions
from .nn_p0 import NoDropout

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
    "held_out_tau",
    "m_step_tau",
]
