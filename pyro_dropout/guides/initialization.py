"""Initial values of the variational means: those of a freshly built ``torch.nn`` or Keras layer."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import torch
from pyro.infer.autoguide.initialization import init_to_median
from torch.distributions import Distribution, Normal

from ..distributions import QuantisedGaussian, base_prior

__all__ = ["base_prior", "init_sites_to", "init_to_fan_in", "init_to_glorot", "is_gaussian_prior"]


def is_gaussian_prior(fn: Distribution) -> bool:
    """True for (quantised) Gaussian priors, the ones with an analytic KL to the dropout family."""
    return isinstance(base_prior(fn), QuantisedGaussian | Normal)


def _init_weights(site: dict[str, Any], bound: Callable[[int, int], float]) -> torch.Tensor:
    """A site's declared start (``infer={"init": value}``: a converted network's trained weights),
    else weights ``U(-b, b)`` with ``b = bound(fan_in, fan_out)``, biases zero, other sites their median."""
    declared = site["infer"].get("init")
    if declared is not None:
        # a copy: the param store trains its start in place, and the declared start (a converted
        # layer's buffer) stays the trained network's (shared, every step changed it and so what the
        # recorded loss reads: each step was recorded again)
        return declared.detach().to(site["fn"].mean.dtype).expand(site["fn"].shape()).clone()
    fn = site["fn"]
    if not is_gaussian_prior(fn):
        return init_to_median(site)
    template = fn.sample().detach()
    event_shape = fn.event_shape
    if len(event_shape) >= 2:
        receptive = math.prod(event_shape[2:])
        b = bound(event_shape[1] * receptive, event_shape[0] * receptive)
        return torch.empty_like(template).uniform_(-b, b)
    return torch.zeros_like(template)


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
    return _init_weights(site, lambda fan_in, fan_out: 1.0 / math.sqrt(fan_in))


def init_to_glorot(site: dict[str, Any] | None = None) -> Any:
    r"""Initialise like Keras' ``Dense`` / ``Conv2D`` (Glorot uniform, Glorot & Bengio 2010).

    Weights ``[out, in, ...]`` get :math:`\mathcal{U}(\pm\sqrt{6 / (\text{fan-in} +
    \text{fan-out})})`, with ``fan-in = in * prod(kernel)`` and ``fan-out = out * prod(kernel)``
    (as ``torch.nn.init.xavier_uniform_``); biases and other Gaussian-prior sites start at zero,
    any other site at its prior median, as in :func:`init_to_fan_in`. The published dropout
    experiments were written in Keras and start here; for a one-output layer on 50 units this
    is 2.4 times wider than :func:`init_to_fan_in`.
    """
    if site is None:
        return init_to_glorot
    return _init_weights(site, lambda fan_in, fan_out: math.sqrt(6.0 / (fan_in + fan_out)))


def init_sites_to(values: Mapping[str, float], fallback: Callable = init_to_fan_in) -> Callable:
    """An ``init_loc_fn`` that starts each site named in ``values`` at that value (filled to the
    site's shape, e.g. a precision ``tau`` per run) and every other site by ``fallback``.

    Usage:

        guide = DropoutGuide(model, init_loc_fn=init_sites_to({"tau": 1.0}))
    """
    for name, value in values.items():
        if not isinstance(value, int | float) or not math.isfinite(value):
            raise ValueError(
                f"init_sites_to: the start of site {name!r} must be a finite number, got {value!r}"
            )
    return partial(_site_or, values=dict(values), fallback=fallback)


def _site_or(site: dict[str, Any], values: dict[str, float], fallback: Callable) -> torch.Tensor:
    if site["name"] in values:
        fn = site["fn"]
        shape = fn.batch_shape + fn.event_shape
        return torch.full(shape, float(values[site["name"]]), dtype=fn.mean.dtype, device=fn.mean.device)
    return fallback(site)
