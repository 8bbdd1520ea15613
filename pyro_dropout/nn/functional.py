r"""Layer functions that broadcast sampled weights over particle and sample dims.

Under ``vectorize_particles=True`` or ``Predictive(parallel=True)`` a global weight of
shape ``[out, in]`` is sampled with batch shape ``[S, 1]`` (``S`` draws; the ``1`` is the
slot of the data plate), i.e. as ``[S, 1, out, in]``. ``x @ W.T`` would then give
``[S, 1, N, out]`` and the likelihood would broadcast silently to ``[S, S, N]``. These
functions drop trailing singleton batch dims (the plate slots) of weights and biases,
so that outputs come out as ``[S, N, out]``.

Usage:

    def model(x, y=None):
        w = pyro.sample("w", QuantisedGaussian(0.0, 1.0).expand([50, 1]).to_event(2))
        h = linear(x, w)          # [N, 50], or [S, N, 50] under vectorised draws
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from pyro.poutine.runtime import get_plates

from .masking import input_mask_for
from .products import batched_linear

__all__ = [
    "avg_pool2d",
    "check_dtypes",
    "conv",
    "conv1d",
    "conv2d",
    "conv3d",
    "flatten",
    "linear",
    "matmul",
    "max_pool2d",
    "over_draws",
    "strip_plate_slots",
    "take_mask",
]


def strip_plate_slots(t: torch.Tensor, core_dim: int) -> torch.Tensor:
    """Drop the trailing size-1 batch dims left of the last ``core_dim`` dims of ``t``.

    A size-1 dim where an enclosing ``pyro.plate`` of size 1 sits is a real plate (e.g. one
    run in a plate of runs) and is kept; every other trailing size-1 dim is a broadcast slot.
    """
    batch = t.shape[: t.dim() - core_dim]
    if not batch or batch[-1] != 1:
        return t
    size_one_plates = {f.dim for f in get_plates() if f.vectorized and f.dim is not None and f.size == 1}
    keep = len(batch)
    while keep > 0 and batch[keep - 1] == 1 and (keep - 1 - len(batch)) not in size_one_plates:
        keep -= 1
    if keep == len(batch):
        return t
    return t.reshape(batch[:keep] + t.shape[t.dim() - core_dim :])


def unexpand(t: torch.Tensor, core_dim: int) -> torch.Tensor:
    """``t`` with every batch dim left of its last ``core_dim`` dims that is an expansion (stride 0:
    the same values for every draw, as a point-mass weight of the guide) cut to size 1, so that a
    layer computes once what would be the same for every draw; the result broadcasts as before."""
    batch = t.dim() - core_dim
    for dim in range(batch):
        if t.shape[dim] > 1 and t.stride(dim) == 0:
            t = t.narrow(dim, 0, 1)
    return t


def check_dtypes(what: str, x: torch.Tensor, weight: torch.Tensor) -> None:
    """A clear error when the inputs' dtype is not the weights' (integer data, or float32 data for a
    float64 model): torch's own says only 'mat1 and mat2 must have the same dtype'."""
    if x.dtype != weight.dtype:
        raise TypeError(
            f"{what}: the input has dtype {x.dtype} but the layer's weights are {weight.dtype}; "
            f"convert the data with x.to({weight.dtype}) (or the model with model.to({x.dtype}))"
        )


def _batch_shape(what: str, *shapes: torch.Size) -> torch.Size:
    try:
        return torch.broadcast_shapes(*shapes)
    except RuntimeError as e:
        raise ValueError(f"{what}: sample/batch dims {[tuple(s) for s in shapes]} do not broadcast") from e


def take_mask(weight: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor]:
    """For a layer that applies ``weight`` to inputs like ``x`` ``[..., N, in]`` at several places
    (a recurrent layer, at every time step): ``(keep, w)``. ``keep`` is the weight's one
    per-example mask (``None`` outside :func:`~pyro_dropout.nn.masking.per_example_masks`, or for
    a weight not masked so), to multiply those inputs by wherever the weight meets them; ``w`` is
    the weight to multiply them with, which :func:`linear` then leaves unmasked."""
    pending = input_mask_for(weight)
    if pending is None:
        return None, weight
    return pending.keep_mask(x, strip_plate_slots), weight.view(weight.shape)


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    r"""``x @ weight.T + bias`` for weights with leading sample dims.

    :param x: inputs ``[..., N, in]`` (leading dims: sample/particle dims of earlier layers).
    :param weight: ``[*S, out, in]``, possibly with plate slots ``[*S, 1, out, in]``.
    :param bias: ``[*S, out]`` (or with plate slots), optional.
    :returns: ``[*S, ..., N, out]`` with the plate slots removed.

    Batched weights run as one ``baddbmm`` over all draws, the bias fused in (for a layer with
    few outputs, in prediction, as its transpose: :mod:`pyro_dropout.nn.products`); unbatched
    ones as ``F.linear``. Under per-example masks (:mod:`pyro_dropout.nn.masking`) the
    input rows are masked, one mask per example, and multiplied by the weight's mean.
    """
    if weight.dim() < 2:
        raise ValueError(f"linear: weight must be at least 2-d [out, in], got shape {tuple(weight.shape)}")
    check_dtypes("linear", x, weight)
    if x.shape[-1] != weight.shape[-1]:
        raise ValueError(
            f"linear: input has {x.shape[-1]} features (shape {tuple(x.shape)}) but the weight of "
            f"shape {tuple(weight.shape)} expects {weight.shape[-1]}"
        )
    pending = input_mask_for(weight)
    if pending is not None:
        x = pending.mask_input(x, strip_plate_slots)
    weight = strip_plate_slots(unexpand(weight, 2), 2)
    b = None if bias is None else strip_plate_slots(unexpand(bias, 1), 1)
    if b is not None and b.shape[-1] != weight.shape[-2]:
        raise ValueError(f"linear: bias of shape {tuple(b.shape)} does not match {weight.shape[-2]} outputs")
    if weight.dim() == 2 and (b is None or b.dim() == 1):
        return F.linear(x, weight, b)
    if x.dim() < 2:
        out = torch.matmul(x, weight.transpose(-1, -2))
        return out if b is None else out + b
    batch = _batch_shape("linear", x.shape[:-2], weight.shape[:-2], *(() if b is None else (b.shape[:-1],)))
    n, d_in, d_out = x.shape[-2], x.shape[-1], weight.shape[-2]
    xs = x.expand(batch + x.shape[-2:]).reshape(-1, n, d_in)
    ws = weight.expand(batch + weight.shape[-2:]).reshape(-1, d_out, d_in)
    bs = None if b is None else b.expand(batch + b.shape[-1:]).reshape(-1, d_out)
    return batched_linear(xs, ws, bs).reshape(batch + (n, d_out))


def matmul(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``x @ weight + bias`` for a weight stored ``[in, out]`` (the ``x @ W`` convention) with
    leading sample dims, the plate slots dropped as in :func:`linear`. Declare the site with
    ``infer={"dropout_dim": -2}`` so that its masks drop input units (rows)."""
    if weight.dim() < 2:
        raise ValueError(f"matmul: weight must be at least 2-d [in, out], got shape {tuple(weight.shape)}")
    pending = input_mask_for(weight)
    if pending is not None:
        raise ValueError(
            f"site '{pending.name}': per-example masks need an [out, in] weight used with linear(); "
            "an [in, out] weight is masked per draw (per_example_masks=False)"
        )
    return linear(x, weight.transpose(-1, -2), bias)


def conv2d(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> torch.Tensor:
    r"""2-d convolution for weights with leading sample dims.

    :param x: images ``[..., N, C, H, W]``.
    :param weight: ``[*S, out, C/groups, kh, kw]``, possibly with plate slots.
    :param bias: ``[*S, out]``, optional.
    :returns: ``[*S, N, out, H', W']`` (batch dims of ``x`` and ``weight`` broadcast).

    All draws run as one grouped convolution. Under per-example masks
    (:mod:`pyro_dropout.nn.masking`) the input channels of each image are masked.
    """
    return conv(2, x, weight, bias, stride, padding, dilation, groups)


def conv1d(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, *args: Any
) -> torch.Tensor:
    """1-d convolution (``x``: ``[..., N, C, L]``) for weights with leading sample dims; the
    remaining arguments as :func:`torch.nn.functional.conv1d`'s (see :func:`conv2d`)."""
    return conv(1, x, weight, bias, *args)


def conv3d(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, *args: Any
) -> torch.Tensor:
    """3-d convolution (``x``: ``[..., N, C, D, H, W]``) for weights with leading sample dims;
    the remaining arguments as :func:`torch.nn.functional.conv3d`'s (see :func:`conv2d`)."""
    return conv(3, x, weight, bias, *args)


_CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}


def conv(
    dims: int,
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> torch.Tensor:
    """A ``dims``-d convolution (1, 2 or 3) of :func:`conv2d`'s kind: all draws as one grouped
    convolution, the weights' plate slots dropped."""
    what, core = f"conv{dims}d", dims + 2
    check_dtypes(what, x, weight)
    if x.dim() < core or weight.dim() < core:
        raise ValueError(
            f"{what}: expected x [..., N, C, {dims} spatial dims] and weight [..., out, in, "
            f"{dims} kernel dims], got {tuple(x.shape)} and {tuple(weight.shape)}"
        )
    if x.shape[-core + 1] != weight.shape[-core + 1] * groups:
        raise ValueError(
            f"{what}: input has {x.shape[-core + 1]} channels (shape {tuple(x.shape)}) but the weight "
            f"of shape {tuple(weight.shape)} with groups={groups} expects {weight.shape[-core + 1] * groups}"
        )
    pending = input_mask_for(weight)
    if pending is not None:
        if groups != 1:
            raise ValueError(f"site '{pending.name}': per-example masks support {what} with groups=1 only")
        x = pending.mask_input(x, strip_plate_slots)
    weight = strip_plate_slots(unexpand(weight, core), core)
    b = None if bias is None else strip_plate_slots(unexpand(bias, 1), 1)
    batch = _batch_shape(what, x.shape[:-core], weight.shape[:-core], *(() if b is None else (b.shape[:-1],)))
    if not batch:
        return _CONV[dims](x, weight, b, stride, padding, dilation, groups)
    s = math.prod(batch)
    n, c, space = x.shape[-core], x.shape[-core + 1], x.shape[x.dim() - dims :]
    xs = x.expand(batch + x.shape[-core:]).reshape(s, n, c, *space).transpose(0, 1).reshape(n, s * c, *space)
    ws = weight.expand(batch + weight.shape[-core:]).reshape(
        s * weight.shape[-core], *weight.shape[-core + 1 :]
    )
    bs = None if b is None else b.expand(batch + b.shape[-1:]).reshape(-1)
    out = _CONV[dims](xs, ws, bs, stride, padding, dilation, groups * s)
    out = out.reshape(n, s, weight.shape[-core], *out.shape[2:]).transpose(0, 1)
    return out.reshape(batch + out.shape[1:])


def over_draws(
    fn: Callable[..., torch.Tensor], x: torch.Tensor, core: int, *args: Any, **kwargs: Any
) -> torch.Tensor:
    """``fn(x, *args, **kwargs)`` for an ``fn`` that takes one batch dim before ``core`` dims
    (``F.max_pool2d``: ``[N, C, H, W]``, core 3) on ``x`` with leading draw dims ``[*S, N, ...]``:
    they are folded into the batch and unfolded after."""
    if x.dim() < core + 1:
        raise ValueError(
            f"over_draws: expected an input with a batch dim and {core} more, got {tuple(x.shape)}"
        )
    lead = x.shape[: x.dim() - core]
    out = fn(x.reshape(-1, *x.shape[x.dim() - core :]), *args, **kwargs)
    return out.reshape(*lead, *out.shape[1:])


def max_pool2d(x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
    """``F.max_pool2d`` on images ``[..., N, C, H, W]`` with leading draw dims."""
    return over_draws(F.max_pool2d, x, 3, *args, **kwargs)


def avg_pool2d(x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
    """``F.avg_pool2d`` on images ``[..., N, C, H, W]`` with leading draw dims."""
    return over_draws(F.avg_pool2d, x, 3, *args, **kwargs)


def flatten(x: torch.Tensor, core: int) -> torch.Tensor:
    """The last ``core`` dims of ``x`` as one (``[..., N, C, H, W]`` -> ``[..., N, C*H*W]`` with
    ``core=3``): ``x.view(x.size(0), -1)`` for inputs with leading draw dims."""
    if x.dim() < core + 1:
        raise ValueError(f"flatten: expected an input with a batch dim and {core} more, got {tuple(x.shape)}")
    return x.reshape(*x.shape[: x.dim() - core], -1)
