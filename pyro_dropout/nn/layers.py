r"""Bayesian layers: weights and biases are Pyro sample sites with quantised Gaussian priors."""

from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import Any

import pyro.distributions as dist
import torch
from pyro import poutine
from pyro.distributions.torch_distribution import TorchDistributionMixin
from pyro.nn import PyroModule, PyroSample

from ..distributions import QuantisedGaussian, validate_dropout_rate
from ..ops import is_positive_number
from .functional import linear

__all__ = [
    "BayesianLayer",
    "Linear",
    "declared_rate",
    "minibatch_scale",
    "prior_scale_from_length_scale",
    "sample_site",
]


def minibatch_scale(who: str, num_data: Any, n: int) -> float:
    """The likelihood's scale ``num_data / n`` for a minibatch of ``n`` of ``num_data`` points
    (1 where ``num_data`` is None); a count that is not a positive whole number is an error
    naming it (before, ``num_data=-5`` reached Pyro as "Expected scale > 0")."""
    if num_data is None:
        return 1.0
    if isinstance(num_data, bool) or not isinstance(num_data, numbers.Integral) or num_data < 1:
        raise ValueError(f"{who}: num_data must be a positive int (the data set's size), got {num_data!r}")
    return int(num_data) / n


def sample_site(prior: Callable[[Any], Any]) -> Any:
    """A ``PyroSample`` attribute: a ``PyroModule`` turns it into a sampled tensor on access."""
    return PyroSample(prior)


def prior_scale_from_length_scale(length_scale: float, what: str = "length_scale") -> float:
    """The prior standard deviation :math:`s = 1/l` for a prior length-scale :math:`l > 0`."""
    if not is_positive_number(length_scale):
        raise ValueError(f"{what} must be a positive finite number, got {length_scale!r}")
    return 1.0 / float(length_scale)


LengthScale = float | torch.Tensor


def declared_rate(dropout: float | None, layer: str) -> float | None:
    """A layer's declared drop probability (``None``: left to the guide), checked."""
    if dropout is None:
        return None
    validate_dropout_rate(dropout, f"{layer}: dropout")
    return float(dropout)


def _prior_scale(length_scale: LengthScale, what: str) -> torch.Tensor:
    """``1/l`` as a tensor: a 0-dim one for a number, one entry per batch element for a tensor."""
    if not isinstance(length_scale, torch.Tensor):
        return torch.tensor(prior_scale_from_length_scale(length_scale, what))
    if not length_scale.is_floating_point() or length_scale.numel() == 0:
        raise ValueError(f"{what} must be a non-empty floating-point tensor, got {length_scale!r}")
    values = length_scale.detach()
    if not bool(torch.isfinite(values).all() and (values > 0).all()):
        raise ValueError(f"{what} must be positive and finite everywhere, got {values.tolist()}")
    return values.reciprocal().to(torch.get_default_dtype())


class BayesianLayer(PyroModule):
    """Holds prior scales as buffers so ``.to(device)`` / ``.double()`` move the priors too."""

    weight_shape: tuple[int, ...]
    weight: torch.Tensor
    bias: torch.Tensor | None
    prior_weight_scale: torch.Tensor
    prior_bias_scale: torch.Tensor
    prior_loc: torch.Tensor

    def _init_priors(
        self,
        weight_shape: tuple[int, ...],
        bias: bool,
        length_scale: LengthScale,
        bias_length_scale: LengthScale | None,
        resolution: float | None,
        prior: str = "quantised",
    ) -> None:
        if prior not in ("quantised", "normal"):
            raise ValueError(f"prior must be 'quantised' or 'normal', got {prior!r}")
        if prior == "normal" and resolution is not None:
            raise ValueError("a resolution applies to the quantised prior only")
        self.weight_shape = weight_shape
        self.resolution = resolution
        self.prior = prior
        self.register_buffer("prior_loc", torch.tensor(0.0))
        weight_scale = _prior_scale(length_scale, "length_scale")
        bls = length_scale if bias_length_scale is None else bias_length_scale
        bias_scale = _prior_scale(bls, "bias_length_scale")
        # tensor length-scales give the priors a batch shape (one prior per run, say); the
        # scales keep size-1 event dims so that they broadcast against the weight's shape
        self.prior_batch_shape = torch.broadcast_shapes(weight_scale.shape, bias_scale.shape)
        if self.prior_batch_shape:
            weight_scale = weight_scale.reshape(weight_scale.shape + (1,) * len(weight_shape))
            bias_scale = bias_scale.reshape(bias_scale.shape + (1,))
        self.register_buffer("prior_weight_scale", weight_scale)
        self.register_buffer("prior_bias_scale", bias_scale)
        self.weight = sample_site(type(self)._weight_prior)
        self.bias = sample_site(type(self)._bias_prior) if bias else None
        self.has_bias = bool(bias)

    dropout: float | None = None
    network_masks = False  # a converted network's layer whose inputs its own dropout masks (nn.convert)
    learnable_rate = False  # ... by dropout modules whose rate a guide may learn (concrete=True)

    def declared_weight(self) -> torch.Tensor:
        """The weight, sampled with what the layer declares in its site's ``infer`` dict: its rate
        (``dropout=``), read by :class:`~pyro_dropout.guides.DropoutGuide`, whether the network's
        own dropout draws its masks (``network_masks``), and its starting
        mean (``start=``, a converted network's trained weight), read by the initialisers."""
        declared: dict[str, Any] = {}
        if self.dropout is not None:
            declared["dropout"] = self.dropout
        if self.network_masks:
            declared["network_masks"] = True
        if self.learnable_rate:
            declared["learnable_rate"] = True
        start = getattr(self, "start_weight", None)  # a buffer of a converted layer (nn.convert)
        if start is not None:
            declared["init"] = start
        return self._declared("weight", declared)

    def declared_bias(self) -> torch.Tensor | None:
        start = getattr(self, "start_bias", None)
        if start is None or not self.has_bias:  # (reading self.bias would sample it: not first)
            return self.bias
        return self._declared("bias", {"init": start})

    def _declared(self, attribute: str, declared: dict[str, Any]) -> Any:
        if not declared:
            return getattr(self, attribute)
        config: Any = lambda msg: dict(declared) if msg["type"] == "sample" else {}  # noqa: E731
        with poutine.infer_config(config_fn=config):
            return getattr(self, attribute)

    def _prior(self, scale: torch.Tensor) -> TorchDistributionMixin:
        if self.prior == "normal":
            return dist.Normal(self.prior_loc, scale)
        return QuantisedGaussian(self.prior_loc, scale, self.resolution)

    def _weight_prior(self) -> TorchDistributionMixin:
        shape = self.prior_batch_shape + self.weight_shape
        return self._prior(self.prior_weight_scale).expand(shape).to_event(len(self.weight_shape))

    def _bias_prior(self) -> TorchDistributionMixin:
        shape = self.prior_batch_shape + self.weight_shape[:1]
        return self._prior(self.prior_bias_scale).expand(shape).to_event(1)


class Linear(BayesianLayer):
    r"""A Bayesian ``nn.Linear``: ``weight`` ``[out, in]`` and ``bias`` ``[out]`` are sample sites.

    Each has the prior :math:`\mathcal{N}(0, l^{-2})` quantised (see
    :class:`~pyro_dropout.distributions.QuantisedGaussian`), with prior length-scale
    :math:`l` = ``length_scale``. The forward pass broadcasts over leading sample and
    particle dims of the weights (:func:`~pyro_dropout.nn.functional.linear`).

    Usage:

        class Net(PyroModule):
            def __init__(self):
                super().__init__()
                self.fc1, self.fc2 = Linear(1, 50), Linear(50, 1)

    :param length_scale: prior length-scale of the weights (prior std ``1/length_scale``).
        A tensor gives one prior per batch element: shape ``[R, 1]`` inside a plate of ``R``
        runs at dim -2 (as :class:`~pyro_dropout.nn.MLP` does with ``runs=R``).
    :param bias_length_scale: prior length-scale of the bias (default: ``length_scale``).
    :param resolution: quantisation grid width of the prior (see ``QuantisedGaussian``).
    :param prior: ``"quantised"`` (the default, :class:`QuantisedGaussian`) or ``"normal"`` (a
        continuous Gaussian with the same scale, e.g. for mean-field VI or HMC baselines).
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        *,
        length_scale: LengthScale = 1.0,
        bias_length_scale: LengthScale | None = None,
        resolution: float | None = None,
        prior: str = "quantised",
        dropout: float | None = None,
    ) -> None:
        super().__init__()
        self.dropout = declared_rate(dropout, "Linear")
        if in_features < 1 or out_features < 1:
            raise ValueError(f"Linear: sizes must be positive, got in={in_features}, out={out_features}")
        self.in_features, self.out_features = in_features, out_features
        self._init_priors(
            (out_features, in_features), bias, length_scale, bias_length_scale, resolution, prior
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.declared_weight(), self.declared_bias())

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}"
