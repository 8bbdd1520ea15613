r"""The quantised Gaussian prior over network weights (Gal, 2016, §6.5; paper [1], appendix B)."""

from __future__ import annotations

import math
from numbers import Real
from typing import Any

import torch
from pyro.distributions import TorchDistribution
from torch.distributions import constraints
from torch.distributions.utils import broadcast_all

from .masked_weight import SampleShape

__all__ = ["QuantisedGaussian"]


class QuantisedGaussian(TorchDistribution):
    r"""A Gaussian prior quantised to a grid of cell width ``resolution``.

    Each weight takes values on the grid :math:`\delta\mathbb{Z}` with probability

    $$
    P(w) \approx \delta\, \mathcal{N}(w;\ \mu, s^2) \qquad (\delta \to 0),
    $$

    so the log-probability of a grid point is the Gaussian log-density plus the
    **quantisation constant** :math:`\log\delta`. Quantisation changes nothing a
    gradient can see, but it makes the KL divergence from the dropout family (a
    discrete distribution) finite and exact (paper [1], appendix B), see
    :mod:`pyro_dropout.distributions.kl`.

    ``log_prob`` returns

    * the Gaussian log-density when ``resolution`` is ``None`` (the default; all
      probabilities and KLs are then measured relative to the grid cell, i.e. the
      constant :math:`\log\delta` is omitted per weight), or
    * the log-probability of the grid cell, :math:`\log \mathcal{N} + \log\delta`,
      when a ``resolution`` is given.

    The prior length-scale of the papers is :math:`l = 1/s`.

    ``sample`` draws from the Gaussian and rounds to the grid when a resolution is
    set. ``rsample`` is not provided: a quantised variable has no reparameterisation.

    Usage:

        w = pyro.sample("w", QuantisedGaussian(0.0, 1.0).expand([50, 13]).to_event(2))

    :param loc: the prior mean :math:`\mu`.
    :param scale: the prior standard deviation :math:`s = 1/l`; must be positive.
    :param resolution: the grid cell width :math:`\delta` (optional, positive).

    References

    [1] Y. Gal, J. Hron, A. Kendall. *Concrete Dropout.* NeurIPS 2017.
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = False

    def __init__(
        self,
        loc: torch.Tensor | float,
        scale: torch.Tensor | float,
        resolution: float | None = None,
        validate_args: bool | None = None,
    ) -> None:
        self.loc, self.scale = broadcast_all(loc, scale)
        if resolution is not None and not (isinstance(resolution, Real) and resolution > 0):
            raise ValueError(f"QuantisedGaussian: resolution must be a positive float, got {resolution!r}")
        self.resolution = None if resolution is None else float(resolution)
        batch_shape = (
            self.loc.shape
            if isinstance(loc, torch.Tensor) or isinstance(scale, torch.Tensor)
            else torch.Size()
        )
        super().__init__(batch_shape, validate_args=validate_args)

    @property
    def log_resolution(self) -> float:
        """:math:`\\log\\delta`, or 0 when no resolution is set (the density convention)."""
        return 0.0 if self.resolution is None else math.log(self.resolution)

    def expand(self, batch_shape: Any, _instance: Any = None) -> QuantisedGaussian:
        new = self._get_checked_instance(QuantisedGaussian, _instance)
        batch_shape = torch.Size(batch_shape)
        new.loc = self.loc.expand(batch_shape)
        new.scale = self.scale.expand(batch_shape)
        new.resolution = self.resolution
        super(QuantisedGaussian, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self) -> torch.Tensor:
        return self.loc

    @property
    def mode(self) -> torch.Tensor:
        return self.loc

    @property
    def variance(self) -> torch.Tensor:
        return self.scale.pow(2)

    def sample(self, sample_shape: SampleShape = torch.Size()) -> torch.Tensor:  # noqa: B008
        shape = self._extended_shape(sample_shape)
        with torch.no_grad():
            value = torch.normal(self.loc.expand(shape), self.scale.expand(shape))
            if self.resolution is not None:
                value = torch.round(value / self.resolution) * self.resolution
        return value

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        if self._validate_args:
            self._validate_sample(value)
        z = (value - self.loc) / self.scale
        log_density = -0.5 * z.pow(2) - self.scale.log() - 0.5 * math.log(2 * math.pi)
        return log_density + self.log_resolution
