r"""A recorded graph's admission: run from the eager loss's random state, it must give the eager
loss's value and gradient and leave the generator where the eager loss leaves it (a recorder may
drop a draw whose value is unused, and every later mask would then differ). Checked once, when the
graph is recorded: the guards (:mod:`pyro_dropout.guards`), read on every call, are what keeps it
right afterwards."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ...guards import set_torch_rng, torch_rng
from ...guards.trees import flatten

__all__ = ["RTOL", "admitted", "same", "side_by_side"]

RTOL = 1e-3  # a graph's and the eager loss's values and gradients agree to this, relative to their size


def side_by_side(first: Callable[[], Any], second: Callable[[], Any], device: torch.device) -> tuple:
    """``first()``, then ``second()`` from the random state ``first`` started from, and whether the
    generator ends where ``first`` left it."""
    start = torch_rng(device)
    a = first()
    after = torch_rng(device)
    set_torch_rng(start, device)
    b = second()
    return a, b, all(x is y or torch.equal(x, y) for x, y in zip(after, torch_rng(device), strict=True))


def same(value: torch.Tensor, expected: torch.Tensor) -> bool:
    """Whether two values (or gradients) agree to :data:`RTOL` of the expected's size."""
    finite = expected[torch.isfinite(expected)]
    scale = max(1.0, float(finite.abs().max())) if finite.numel() else 1.0
    return value.shape == expected.shape and torch.allclose(
        value, expected, rtol=RTOL, atol=RTOL * scale, equal_nan=True
    )


def _gradients(value: torch.Tensor, params: tuple[torch.Tensor, ...]) -> list[torch.Tensor]:
    wanted = [p for p in params if p.requires_grad]
    grads = torch.autograd.grad(value, wanted, allow_unused=True) if value.requires_grad else ()
    return [torch.zeros_like(p) if g is None else g for p, g in zip(wanted, grads, strict=False)]


def admitted(graph: Callable, inputs: tuple, num_params: int, eager: Callable, device: torch.device) -> str:
    """ "" where ``graph(*inputs)``, from ``eager()``'s random state, gives its values (a tensor, or a
    dict of them), gradient (of a scalar, with respect to the first ``num_params`` inputs) and
    draws; else how they differ. Each gradient is taken as soon as its value is: the other run may
    change in place what the first saved (a batch norm's running statistics)."""
    params = tuple(inputs[:num_params])

    def run(fn: Callable[[], Any]) -> tuple[Any, list[torch.Tensor]]:
        value = fn()
        scalar = num_params and isinstance(value, torch.Tensor) and value.dim() == 0
        return value, _gradients(value, params) if scalar else []

    (expected, want), (value, got), same_draws = side_by_side(
        lambda: run(eager), lambda: run(lambda: graph(*inputs)), device
    )
    if not same_draws:
        return "the recorded graph draws other random numbers than the code run eagerly"
    found, wanted = flatten(value), flatten(expected)
    if found[1] != wanted[1] or not all(map(_same_leaf, found[0], wanted[0])):
        return "the recorded graph's values differ from the code run eagerly"
    if len(got) != len(want) or not all(map(same, got, want)):
        return "the recorded graph's gradient differs from the code run eagerly"
    return ""


def _same_leaf(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return same(a.detach(), b.detach())
    return bool(a == b)
