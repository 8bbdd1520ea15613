r"""Divergence: a loss that is no longer finite stops training at the step where it happens,
with what went wrong (non-finite parameters, inputs too large for the model's dtype, or a loss
that overflowed on its own), instead of training on NaN parameters."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any, cast

import torch
from pyro.infer.util import is_validation_enabled

from .input_checks import check_finite_inputs, has_non_finite, named_inputs

__all__ = ["DivergenceError", "all_finite", "backward_checked", "check_gradients", "check_loss", "diagnose"]

_FUSED_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


class DivergenceError(ValueError):
    """The loss became NaN or infinite; the message says where and what is not finite."""


def _too_large(value: Any) -> float | None:
    """The largest magnitude in a floating tensor if its square overflows the tensor's dtype."""
    if not (isinstance(value, torch.Tensor) and value.is_floating_point() and value.numel()):
        return None
    biggest = float(value.detach().abs().max())
    return biggest if biggest > math.sqrt(torch.finfo(value.dtype).max) else None


def diagnose(args: tuple, kwargs: dict, params: Iterable[tuple[str, torch.Tensor]]) -> str:
    """Why a loss is not finite: the parameters that are not, else the inputs too large to square."""
    params = list(params)
    for what, test in (("holding NaN or inf", has_non_finite), ("too large to square", _too_large)):
        bad = [name for name, value in params if test(value)]
        if bad:
            shown = ", ".join(bad[:5]) + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
            return f"parameters {what}: {shown} (the steps before diverged: lower the learning rate)"
    for what, value in named_inputs(args, kwargs):
        biggest = _too_large(value)
        if biggest is not None:
            return (
                f"{what} holds values up to {biggest:.3g}, too large to square in {value.dtype}: "
                "standardise the data (or use float64)"
            )
    return (
        "the parameters and inputs are finite, so the loss overflowed on its own (a learning rate too "
        "large, or a variance that collapsed): lower the learning rate"
    )


def check_loss(
    value: float, where: str, args: tuple, kwargs: dict, params: Iterable[tuple[str, torch.Tensor]]
) -> None:
    """Raise :class:`DivergenceError` naming ``where`` unless ``value`` is finite."""
    if not math.isfinite(value):
        raise DivergenceError(f"{where}: the loss is {value}; {diagnose(args, kwargs, params)}")


_FLAGS: dict[torch.device, tuple[torch.Tensor, torch.Tensor]] = {}


def _flags(device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """The fused test's flag and its scale of 1 on ``device``, made once."""
    if device not in _FLAGS:
        _FLAGS[device] = (torch.zeros(1, device=device), torch.ones(1, device=device))
    return _FLAGS[device]


def all_finite(tensors: list[torch.Tensor]) -> bool:
    """Whether every entry of ``tensors`` is finite: one fused pass over them all (the test of
    ``torch.amp``'s gradient scaler, which multiplies them by 1 in place, changing nothing) and one
    read of its flag, where the tensors share a device and a floating dtype; else one reduction each."""
    first = tensors[0]
    if first.dtype in _FUSED_DTYPES and all(
        t.dtype == first.dtype and t.device == first.device for t in tensors
    ):
        found, one = _flags(first.device)
        found.zero_()
        try:
            torch._amp_foreach_non_finite_check_and_unscale_(tensors, found, one)
        except (RuntimeError, NotImplementedError):  # a PyTorch or device without the fused test
            pass
        else:
            return not bool(found)
    total = torch.stack([t.sum(dtype=torch.float64) for t in tensors]).sum()
    return bool(torch.isfinite(total)) or not any(has_non_finite(t) for t in tensors)


def check_gradients(
    where: str, params: Iterable[tuple[str, torch.Tensor]], args: tuple, kwargs: dict
) -> None:
    """Raise :class:`DivergenceError` naming the parameters whose gradient holds NaN or inf
    (one fused test, :func:`all_finite`, when all are finite). Their gradients are cleared first, so that a
    caller who goes on starts from clean gradients; the update is not applied."""
    named = [(name, p) for name, p in params if p.grad is not None]
    if not named or all_finite([cast(torch.Tensor, p.grad) for _, p in named]):
        return
    bad = [name for name, p in named if has_non_finite(p.grad)]
    for _, p in named:
        p.grad = None
    if bad:
        shown = ", ".join(bad[:5]) + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
        why = diagnose(args, kwargs, [])
        raise DivergenceError(f"{where}: the gradient is not finite for {shown}; {why}")


def backward_checked(
    loss: torch.Tensor,
    where: str,
    args: tuple,
    kwargs: dict,
    params: Callable[[], Iterable[tuple[str, torch.Tensor]]],
    check_finite: bool,
    retain_graph: bool | None = None,
) -> float:
    """``loss.backward()`` and the loss's value; with ``check_finite``, a loss that is not finite
    raises before any gradient reaches the parameters (an input holding NaN or inf named as its
    cause), and, under Pyro's validation, so does a gradient that is not (:func:`check_gradients`)."""
    value = float(loss.detach())
    if check_finite and not math.isfinite(value):
        check_finite_inputs(args, kwargs)  # free while the loss is finite
        check_loss(value, where, args, kwargs, params())
    if loss.requires_grad:
        loss.backward(retain_graph=retain_graph)
        if check_finite and is_validation_enabled():
            check_gradients(where, params(), args, kwargs)
    return value
