"""Distributions: the quantised Gaussian prior and the dropout variational families."""

from . import kl
from .bernoulli_dropout import BernoulliDropout, bernoulli_keep
from .categorical import Categorical
from .concrete_dropout import ConcreteDropout
from .fixed_noise import FixedNoiseNormal
from .kl import bernoulli_entropy, kl_masked_gaussian, kl_terms
from .masked_weight import MaskedWeight, check_mask_dim, mask_dim_for, validate_dropout_rate
from .network_dropout import NetworkDropout
from .quantised_gaussian import QuantisedGaussian
from .util import base_prior

__all__ = [
    "BernoulliDropout",
    "Categorical",
    "ConcreteDropout",
    "FixedNoiseNormal",
    "MaskedWeight",
    "NetworkDropout",
    "QuantisedGaussian",
    "base_prior",
    "bernoulli_entropy",
    "bernoulli_keep",
    "check_mask_dim",
    "kl",
    "kl_masked_gaussian",
    "kl_terms",
    "mask_dim_for",
    "validate_dropout_rate",
]
