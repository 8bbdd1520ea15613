r"""Pyro's own layers made to take weights with leading draw dimensions.

A model written as Pyro's tutorials write one, ``PyroModule[nn.Linear]`` (or ``nn.Conv1d/2d/3d``) with
``PyroSample`` priors, runs its layers through ``F.linear``, which cannot take the weights of
vectorised particles or ``Predictive(parallel=True)`` (``[S, 1, out, in]``): "t() expects a tensor
with <= 2 dimensions". :func:`broadcast_pyro_layers` gives each such layer the forward of
:mod:`pyro_dropout.nn.functional` (the same numbers for unbatched weights; draws broadcast and the
plate slot dropped for batched ones). :class:`~pyro_dropout.guides.DropoutGuide` calls it on its
model when it is set up.
"""

from __future__ import annotations

from typing import Any

import torch
from pyro.nn import PyroModule

from .functional import conv, linear

__all__ = ["broadcast_pyro_layers", "module_inside"]

_ADAPTED: dict[type, type] = {}


def _linear_forward(self: Any, x: torch.Tensor) -> torch.Tensor:
    return linear(x, self.weight, self.bias)


def _conv_forward(self: Any, x: torch.Tensor) -> torch.Tensor:
    if self.padding_mode != "zeros":
        raise ValueError(
            f"{type(self).__name__}: padding_mode {self.padding_mode!r} is not supported under draws"
        )
    dims = len(self.kernel_size)
    return conv(dims, x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)


def _adapted(cls: type) -> type | None:
    if cls in _ADAPTED:
        return _ADAPTED[cls]
    if issubclass(cls, torch.nn.Linear):
        forward = _linear_forward
    elif issubclass(cls, torch.nn.Conv1d | torch.nn.Conv2d | torch.nn.Conv3d):
        forward = _conv_forward
    else:
        return None
    new = type(cls.__name__, (cls,), {"forward": forward, "_pyro_dropout_broadcasts": True})
    _ADAPTED[cls] = new
    return new


def module_inside(model: Any, depth: int = 16) -> torch.nn.Module | None:
    """``model`` if it is a module, or the module that Pyro's handlers (``poutine.block``,
    ``poutine.scale``, ...) or ``functools.wraps`` wrap; ``None`` for any other callable."""
    for _ in range(depth):
        if isinstance(model, torch.nn.Module):
            return model
        model = getattr(model, "__wrapped__", None)
    return None


def broadcast_pyro_layers(model: Any) -> list[str]:
    """Give every ``PyroModule[nn.Linear]`` / ``PyroModule[nn.Conv1d/2d/3d]`` in ``model`` (in place) a
    forward that broadcasts over leading draw dimensions; returns the names of those changed.
    Plain ``nn`` layers (fixed weights) and ``pyro_dropout.nn`` layers are left as they are.
    A model wrapped by Pyro's handlers (``poutine.block(model, hide=[...])``, as a guide in an
    ``AutoGuideList`` is given) is the module inside."""
    model = module_inside(model)
    if model is None:
        return []
    changed = []
    for name, module in model.named_modules():
        cls = type(module)
        if not isinstance(module, PyroModule) or getattr(cls, "_pyro_dropout_broadcasts", False):
            continue
        new = _adapted(cls)
        if new is not None:
            module.__class__ = new
            changed.append(name)
    return changed
