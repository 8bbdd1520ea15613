"""Numerical operations shared by every layer of the package (it imports nothing from it), and
what a pass costs in memory: its largest tensor, and the CPU's caches it should fit."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeGuard

import torch
from torch.overrides import TorchFunctionMode

__all__ = [
    "HALF_LOG_2PI",
    "cache_bytes",
    "check_seed",
    "is_positive_int",
    "is_positive_number",
    "largest_tensor_bytes",
    "log_mean_exp",
    "tensor_sizes",
]

HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)  # the normal density's constant


def is_positive_int(value: Any) -> TypeGuard[int]:
    """Whether ``value`` is an ``int`` of at least 1 (a bool, a float or a NumPy integer is not):
    the check behind every "must be a positive int" error."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def is_positive_number(value: Any) -> TypeGuard[float]:
    """Whether ``value`` is a finite ``int`` or ``float`` above 0 (a bool, NaN or inf is not): the
    check behind every "must be a positive finite number" error."""
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 < value < math.inf


def check_seed(seed: Any, where: str) -> int:
    """``seed`` as PyTorch's generators take it: an int in [0, 2**63); a clear error otherwise."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
        raise ValueError(f"{where}: seed must be an int in [0, 2**63), got {seed!r}")
    return seed


def log_mean_exp(x: torch.Tensor, dim: int = 0) -> torch.Tensor:
    r""":math:`\log \frac1K \sum_k e^{x_k}` along ``dim``, precise even for close :math:`x_k`.

    Computed as :math:`m + \mathrm{log1p}(\mathrm{mean}(\mathrm{expm1}(x - m)))` with
    :math:`m = \max_k x_k`, so that tiny spreads (BB-α with small α) keep full precision.
    """
    m = x.detach().amax(dim=dim, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    return (m + torch.log1p(torch.expm1(x - m).mean(dim=dim, keepdim=True))).squeeze(dim)


class _Sizes(TorchFunctionMode):
    """The bytes of every tensor a pass of PyTorch functions returns, in order (broadcast views not
    counted)."""

    def __init__(self) -> None:
        super().__init__()
        self.sizes: list[int] = []

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        result = func(*args, **(kwargs or {}))
        for value in result if isinstance(result, tuple | list) else (result,):
            if isinstance(value, torch.Tensor) and 0 not in value.stride():
                self.sizes.append(value.numel() * value.element_size())
        return result


def tensor_sizes(fn: Callable[[], Any]) -> tuple[Any, list[int]]:
    """``fn()``, and the bytes of every tensor made on the way, in order."""
    with _Sizes() as mode:
        result = fn()
    return result, mode.sizes


def caller_stacklevel() -> int:
    """The ``stacklevel`` for ``warnings.warn`` that names the first frame outside this library,
    Pyro and PyTorch: a warning raised deep inside Pyro's machinery (a guide set up lazily at
    its first call) then points at the user's line that started it."""
    import os
    import sys

    import pyro

    folders = (
        Path(__file__).resolve().parent,
        *(Path(str(m.__file__)).resolve().parent for m in (pyro, torch)),
    )
    inside = tuple(str(f) + os.sep for f in folders)  # a folder's own files, not its namesakes
    frame: Any = sys._getframe(1)
    level = 1
    while frame is not None and frame.f_code.co_filename.startswith(inside):
        frame, level = frame.f_back, level + 1
    return level


def largest_tensor_bytes(fn: Callable[[], Any]) -> tuple[Any, int]:
    """``fn()``, and the bytes of the largest tensor made on the way: one pass's widest layer."""
    result, sizes = tensor_sizes(fn)
    return result, max(sizes, default=0)


def cache_bytes(level: int | None = None) -> int | None:
    """The size of the CPU's cache of ``level`` (None: its largest), from Linux's sysfs; None where
    it is not told."""
    sizes = []
    for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            text = (index / "size").read_text().strip()
            found = int((index / "level").read_text().strip())
        except (OSError, ValueError):
            continue
        unit = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:].upper(), 1)
        digits = text.rstrip("KMGkmg")
        if digits.isdigit() and (level is None or found == level):
            sizes.append(int(digits) * unit)
    return max(sizes) if sizes else None
