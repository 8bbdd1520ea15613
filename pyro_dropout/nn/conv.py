r"""Bayesian convolutions: weights ``[out, in/groups, *kernel]`` and biases are sample sites."""

from __future__ import annotations

from typing import Any

import torch

from ..ops import is_positive_int
from .functional import conv
from .layers import BayesianLayer, LengthScale, declared_rate

__all__ = ["Conv1d", "Conv2d", "Conv3d"]


class _ConvNd(BayesianLayer):
    """A Bayesian ``nn.ConvNd`` of ``dims`` spatial dimensions (set by the subclass)."""

    dims = 2

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | tuple[int, ...],
        stride: Any = 1,
        padding: Any = 0,
        dilation: Any = 1,
        groups: int = 1,
        bias: bool = True,
        *,
        length_scale: LengthScale = 1.0,
        bias_length_scale: LengthScale | None = None,
        resolution: float | None = None,
        prior: str = "quantised",
        dropout: float | None = None,
    ) -> None:
        super().__init__()
        what = type(self).__name__
        self.dropout = declared_rate(dropout, what)
        kernel = tuple(kernel_size) if isinstance(kernel_size, tuple | list) else (kernel_size,) * self.dims
        _check_conv_sizes(what, self.dims, in_channels, out_channels, kernel, stride, dilation, groups)
        if in_channels % groups or out_channels % groups:
            raise ValueError(
                f"{what}: channels ({in_channels}, {out_channels}) not divisible by groups={groups}"
            )
        self.in_channels, self.out_channels = in_channels, out_channels
        self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups
        shape = (out_channels, in_channels // groups, *kernel)
        self._init_priors(shape, bias, length_scale, bias_length_scale, resolution, prior)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight, bias = self.declared_weight(), self.declared_bias()
        return conv(self.dims, x, weight, bias, self.stride, self.padding, self.dilation, self.groups)

    def extra_repr(self) -> str:
        return f"{self.in_channels}, {self.out_channels}, kernel_size={self.weight_shape[2:]}"


class Conv1d(_ConvNd):
    r"""A Bayesian ``nn.Conv1d`` (inputs ``[..., N, C, L]``); see :class:`Conv2d`."""

    dims = 1


class Conv2d(_ConvNd):
    r"""A Bayesian ``nn.Conv2d``: ``weight`` ``[out, in/groups, kh, kw]`` and ``bias`` are sites.

    Dropout masks the *input channels* of the weight (Gal & Ghahramani, 2016: dropout
    before each convolution). The forward pass runs all weight draws as one grouped
    convolution (:func:`~pyro_dropout.nn.functional.conv2d`). Arguments as ``nn.Conv2d``'s, and
    the priors' and rate's as :class:`~pyro_dropout.nn.Linear`'s.
    """

    dims = 2


class Conv3d(_ConvNd):
    r"""A Bayesian ``nn.Conv3d`` (inputs ``[..., N, C, D, H, W]``); see :class:`Conv2d`."""

    dims = 3


def _check_conv_sizes(
    what: str,
    dims: int,
    in_channels: int,
    out_channels: int,
    kernel: tuple,
    stride: Any,
    dilation: Any,
    groups: int,
) -> None:
    """Whole positive sizes for a convolution (else oneDNN's 'primitive descriptor' error)."""
    sizes = {
        "in_channels": in_channels,
        "out_channels": out_channels,
        "groups": groups,
        "kernel_size": kernel,
        "stride": stride,
        "dilation": dilation,
    }
    for name, value in sizes.items():
        items = value if isinstance(value, tuple) else (value,)
        if not items or any(not is_positive_int(v) for v in items):
            raise ValueError(
                f"{what}: {name} must be a positive whole number (or {dims} of them), got {value!r}"
            )
    if len(kernel) != dims:
        raise ValueError(f"{what}: kernel_size must have {dims} entries, got {kernel!r}")
