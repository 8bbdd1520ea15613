"""Initial values of the variational means: those of a freshly built ``torch.nn`` layer."""

from __future__ import annotations

import math
from typing import Any

import torch
from pyro.infer.autoguide.initialization import init_to_median
from torch.distributions import Distribution, Independent, Normal

from ..distributions import QuantisedGaussian

__all__ = ["base_prior", "init_to_fan_in", "is_gaussian_prior"]


def base_prior(fn: Distribution) -> Distribution:
    """The distribution under any ``Independent`` (``.to_event``) wrappers."""
    while isinstance(fn, Independent):
        fn = fn.base_dist
    return fn


def is_gaussian_prior(fn: Distribution) -> bool:
    """True for (quantised) Gaussian priors, the ones with an analytic KL to the dropout family."""
    return isinstance(base_prior(fn), QuantisedGaussian | Normal)


def init_to_fan_in(site: dict[str, Any] | None = None) -> Any:
    r"""Initialise like ``torch.nn``: weights :math:`\mathcal{U}(\pm 1/\sqrt{\text{fan-in}})`.

    Gaussian-prior sites with two or more event dims (weights ``[out, in, ...]``, fan-in
    ``in * prod(kernel)``) get the default initialisation of ``nn.Linear`` / ``nn.Conv2d``;
    other Gaussian-prior sites (biases, scalars) start at zero; any other site (a noise
    precision with a Gamma prior, say) starts at its prior median. Initialising from the
    prior instead would be poor: the priors of Bayesian networks are often very broad.
    """
    if site is None:
        return init_to_fan_in
    fn = site["fn"]
    if not is_gaussian_prior(fn):
        return init_to_median(site)
    template = fn.sample().detach()
    event_shape = fn.event_shape
    if len(event_shape) >= 2:
        bound = 1.0 / math.sqrt(math.prod(event_shape[1:]))
        return torch.empty_like(template).uniform_(-bound, bound)
    return torch.zeros_like(template)
