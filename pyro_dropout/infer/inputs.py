"""Checks of the arguments a model is called with: no NaN or inf, no empty batch."""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["check_finite_inputs", "check_not_empty", "has_non_finite", "named_inputs"]


def has_non_finite(value: Any) -> bool:
    """True when a floating tensor holds NaN or inf. One float64 reduction: NaN and inf
    survive a sum; only a sum of huge finite values can overflow, and is then checked exactly."""
    if not (isinstance(value, torch.Tensor) and value.is_floating_point()):
        return False
    if bool(torch.isfinite(value.sum(dtype=torch.float64))):
        return False
    return not bool(torch.isfinite(value).all())


def check_finite_inputs(args: tuple, kwargs: dict) -> None:
    """Raise ``ValueError`` naming the first model argument that holds NaN or inf."""
    for what, value in named_inputs(args, kwargs):
        if has_non_finite(value):
            raise ValueError(f"{what} (shape {tuple(value.shape)}) contains NaN or inf")


def check_not_empty(args: tuple, kwargs: dict) -> None:
    """Raise ``ValueError`` naming the first model argument that is an empty tensor (a batch of
    no rows: Pyro's plates would fail with "size cannot be zero")."""
    for what, value in named_inputs(args, kwargs):
        if isinstance(value, torch.Tensor) and value.dim() > 0 and value.numel() == 0:
            raise ValueError(
                f"{what} has shape {tuple(value.shape)}: an empty batch (no rows to fit or predict)"
            )


def named_inputs(args: tuple, kwargs: dict) -> list[tuple[str, Any]]:
    """``("model argument 0", x), ("model argument 'y'", y), ...``: for messages that name them."""
    return [(f"model argument {i}", v) for i, v in enumerate(args)] + [
        (f"model argument '{k}'", v) for k, v in kwargs.items()
    ]
