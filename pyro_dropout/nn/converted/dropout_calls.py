r"""The dropout calls of a network's forward, seen as they run: every function that draws a dropout
mask (``F.dropout`` and its channel and alpha forms, ``torch.dropout``, and the attention dropout
of ``F.scaled_dot_product_attention``, which ``nn.MultiheadAttention`` and Hugging Face models
call), and two modes that act on them: one that switches them off (the pass of the expected
weights) and one that refuses them (a shared mask must never be drawn where the network draws its
own)."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from ...distributions import bernoulli_keep

__all__ = ["DropoutInputs", "FastDropout", "NoDropout", "RefuseDropout", "drop_rate"]

_DROPOUT_FUNCTIONS = {
    F.dropout,
    F.dropout1d,
    F.dropout2d,
    F.dropout3d,
    F.alpha_dropout,
    F.feature_alpha_dropout,
    torch.dropout,
    torch.alpha_dropout,
    torch.feature_alpha_dropout,
}


def drop_rate(func: Any, args: tuple, kwargs: dict) -> float:
    """The drop rate of a call that drops something (0 for any other call, or a dropout that does
    not drop: ``p = 0``, ``training=False``)."""
    if func is F.scaled_dot_product_attention:
        p = kwargs.get("dropout_p", args[4] if len(args) > 4 else 0.0)
        return float(p) if isinstance(p, int | float) else 1.0
    if func not in _DROPOUT_FUNCTIONS:
        return 0.0
    p = kwargs.get("p", args[1] if len(args) > 1 else 0.5)
    training = kwargs.get("training", kwargs.get("train", args[2] if len(args) > 2 else True))
    return float(p) if isinstance(p, int | float) and training is not False else 0.0


class DropoutInputs(TorchFunctionMode):
    """Within the mode, the shape of the input of every dropout call (whatever its rate, ``training``
    flag included: the network may be in eval mode), in order: a call whose input is the same for
    batches of different sizes draws one mask for all the rows of a pass."""

    def __init__(self) -> None:
        super().__init__()
        self.shapes: list[tuple[int, ...]] = []

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func in _DROPOUT_FUNCTIONS or func is F.scaled_dot_product_attention:
            x = kwargs.get("input", kwargs.get("query", args[0] if args else None))
            if isinstance(x, torch.Tensor):
                self.shapes.append(tuple(x.shape))
        return func(*args, **kwargs)

    def unchanged(self, other: DropoutInputs) -> tuple[int, ...] | None:
        """The first input shape that is the same here as in ``other`` (a pass of other rows), or
        ``None`` (every dropout's input grows with the rows)."""
        return next((a for a, b in zip(self.shapes, other.shapes, strict=False) if a == b), None)


class NoDropout(TorchFunctionMode):
    """Within the mode, every dropout call is the identity (attention dropout: ``dropout_p=0``)."""

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if drop_rate(func, args, kwargs) > 0:
            if func is F.scaled_dot_product_attention:
                if len(args) > 4:
                    args = (*args[:4], 0.0, *args[5:])
                else:
                    kwargs = {**kwargs, "dropout_p": 0.0}
            else:
                return kwargs.get("input", args[0] if args else None)
        return func(*args, **kwargs)


_CHANNELS = {F.dropout1d: 1, F.dropout2d: 2, F.dropout3d: 3}  # the spatial dims after the channels


class FastDropout(TorchFunctionMode):
    """Within the mode, element and channel dropout draw their masks with the library's
    :func:`~pyro_dropout.distributions.bernoulli_keep` (uniform 32-bit integers against a
    threshold, two from each random 64-bit word): the same Bernoulli(1 - p) masks, scaled by
    1 / (1 - p), as torch's, in about 0.4x its time on a CPU (``benchmarks/converted_prediction.py``);
    every other call (alpha dropout, attention dropout fused into scaled_dot_product_attention) is
    torch's own."""

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func is F.dropout or func in _CHANNELS:
            p = drop_rate(func, args, kwargs)
            x = kwargs.get("input", args[0] if args else None)
            inplace = kwargs.get("inplace", args[3] if len(args) > 3 else False)
            if isinstance(x, torch.Tensor) and 0 < p < 1 and x.is_floating_point():
                return _masked(x, p, _CHANNELS.get(func), bool(inplace))
        return func(*args, **kwargs)


def _masked(x: torch.Tensor, p: float, space: int | None, inplace: bool) -> torch.Tensor:
    """``x`` times a keep mask over its elements (``space`` None) or over the channels of
    ``[N, C, *space]`` (or unbatched ``[C, *space]``), divided by ``1 - p``."""
    shape = x.shape if space is None else x.shape[: x.dim() - space] + (1,) * space
    keep = bernoulli_keep(shape, 1.0 - p, x.device)
    scale = 1.0 / (1.0 - p)
    return x.mul_(keep).mul_(scale) if inplace else x * keep * scale


class RefuseDropout(TorchFunctionMode):
    """With ``masks="shared"``: refuse a dropout call the conversion did not see (inside a module
    torch.fx does not enter, or a forward it could not trace), which would draw masks of its own
    where a draw's masks must be shared by its rows."""

    def __init__(self, network: str) -> None:
        super().__init__()
        self.network = network

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        p = drop_rate(func, args, kwargs)
        if p > 0:
            raise ValueError(
                f"from_module(masks='shared'): the forward of {self.network} calls "
                f"{getattr(func, '__name__', func)} with a drop rate of {p:g} where the conversion "
                "could not see it (inside a module torch.fx does not enter, or a forward it cannot "
                "trace), so its masks could not be shared by the rows of a draw: convert with "
                "masks='own' (the default), which keeps every dropout as the network draws it"
            )
        return func(*args, **kwargs)
