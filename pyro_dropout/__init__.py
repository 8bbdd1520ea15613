"""pyro_dropout: dropout as approximate Bayesian inference in Pyro.

MC dropout (Gal & Ghahramani, 2016), Concrete dropout (Gal, Hron & Kendall, 2017) and
the BB-alpha energy (Li & Gal, 2017) as a Pyro guide and Pyro losses.
"""

from . import distributions, guides, infer, nn
from .distributions import BernoulliDropout, ConcreteDropout, QuantisedGaussian
from .guides import DropoutGuide
from .infer import BBAlpha, DropoutELBO

__version__ = "0.1.0"

__all__ = [
    "BBAlpha",
    "BernoulliDropout",
    "ConcreteDropout",
    "DropoutELBO",
    "DropoutGuide",
    "QuantisedGaussian",
    "__version__",
    "distributions",
    "guides",
    "infer",
    "nn",
]
