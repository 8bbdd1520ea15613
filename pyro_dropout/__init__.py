"""pyro_dropout: dropout as approximate Bayesian inference in Pyro.

MC dropout (Gal & Ghahramani, 2016), Concrete dropout (Gal, Hron & Kendall, 2017) and
the BB-alpha energy (Li & Gal, 2017) as a Pyro guide and Pyro losses.
"""

from . import distributions, export, guides, infer, metrics, nn, prediction, runtime
from .distributions import BernoulliDropout, ConcreteDropout, QuantisedGaussian
from .export import to_arviz
from .front import MCDropout
from .guides import DropoutGuide
from .infer import BBAlpha, CompiledSVI, DropoutELBO
from .metrics import evaluate
from .prediction import Predictions, predict, predict_standard

__version__ = "0.1.0"

__all__ = [
    "BBAlpha",
    "BernoulliDropout",
    "CompiledSVI",
    "ConcreteDropout",
    "DropoutELBO",
    "DropoutGuide",
    "MCDropout",
    "Predictions",
    "QuantisedGaussian",
    "__version__",
    "distributions",
    "evaluate",
    "export",
    "guides",
    "infer",
    "metrics",
    "nn",
    "predict",
    "predict_standard",
    "prediction",
    "runtime",
    "to_arviz",
]
