r"""Spot checks of a trace against the loss run eagerly: what no key can see, found by its effect.

A trace's key holds the input shapes and the Python values of the model's and guide's modules
(:mod:`~pyro_dropout.infer.fast.frozen`). A value outside them (a global, a closure's variable, an
attribute of an object that is not a module, a number drawn by Python's or NumPy's random
generator) is frozen into the trace unseen. So, at the traced calls 1, 3, 7, 15, ... (and after
each new trace likewise), then at every :data:`CHECK_EVERY`\ th, the loss is also run eagerly,
without gradients, from the random state the traced call started from: the same masks. A different
value means the trace no longer computes the loss the Python code describes, and
:class:`StaleTraceError` says so, instead of training on in silence with a frozen value. One check
costs about one eager forward pass, a fraction of a percent of a long fit's steps.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

__all__ = [
    "CHECK_EVERY",
    "SpotChecks",
    "StaleTraceError",
    "same_loss",
    "same_rng",
    "set_torch_rng",
    "torch_rng",
]

CHECK_EVERY = 256  # the longest interval between two checks, in traced calls
RTOL = 1e-3  # the trace's and the eager loss's values agree to this, relative to the loss's size
# (rounding differs where a trace fuses or reorders; a frozen value that moves the loss by less
# than this is harmless)


class StaleTraceError(RuntimeError):
    """The traced loss no longer equals the eager loss on the same draws."""


class SpotChecks:
    """When the next check is due, and the check itself."""

    def __init__(self, owner: str) -> None:
        self.owner = owner
        self.calls = 0  # traced calls so far
        self.due = 1  # the traced call checked next
        self.passed = 0  # the last traced call a check passed at

    def restart(self) -> None:
        """After a new trace: check it at its first calls again."""
        self.due = self.calls + 1
        self.passed = self.calls

    def run(
        self,
        traced: Callable[..., torch.Tensor],
        inputs: tuple[torch.Tensor, ...],
        eager: Callable[[], torch.Tensor],
    ) -> torch.Tensor:
        """``traced(*inputs)``; at a due call, also ``eager()`` from the same random state."""
        self.calls += 1
        if self.calls != self.due:
            return traced(*inputs)
        device = inputs[0].device if inputs else torch.device("cpu")
        state = torch_rng(device)
        value = traced(*inputs)
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            set_torch_rng(state, device)
            with torch.no_grad():
                expected = eager()
        self._compare(value.detach(), expected.detach())
        step = self.calls - self.passed
        self.passed, self.due = self.calls, self.calls + min(max(2 * step, 1), CHECK_EVERY)
        return value

    def _compare(self, value: torch.Tensor, expected: torch.Tensor) -> None:
        same = same_loss(value, expected)
        if same:
            return
        raise StaleTraceError(
            f"{self.owner}: the traced loss gave {_show(value)} where the loss run eagerly on the same "
            f"draws gives {_show(expected)} (traced call {self.calls}; the last check passed at call "
            f"{self.passed}): a Python value the trace froze has changed outside the model's and guide's "
            "modules (a global, a closure's variable, an attribute of an object that is not a module), "
            "or the loss draws Python's or NumPy's random numbers. Call retrace() after changing such a "
            "value, or pass jit=False to run the loss eagerly."
        )


def same_loss(value: torch.Tensor, expected: torch.Tensor) -> bool:
    """Whether a trace's loss is the eager loss's, to :data:`RTOL` of the loss's size."""
    finite = expected[torch.isfinite(expected)]
    tolerance = RTOL * max(1.0, float(finite.abs().max()) if finite.numel() else 1.0)
    return value.shape == expected.shape and torch.allclose(
        value, expected, rtol=RTOL, atol=tolerance, equal_nan=True
    )


def _show(value: torch.Tensor) -> str:
    return f"{float(value):.8g}" if value.numel() == 1 else f"a tensor of shape {tuple(value.shape)}"


def torch_rng(device: torch.device) -> tuple[Any, Any]:
    return torch.get_rng_state(), torch.cuda.get_rng_state(device) if device.type == "cuda" else None


def set_torch_rng(state: tuple[Any, Any], device: torch.device) -> None:
    torch.set_rng_state(state[0])
    if state[1] is not None:
        torch.cuda.set_rng_state(state[1], device)


def same_rng(a: tuple[Any, Any], b: tuple[Any, Any]) -> bool:
    """Whether two :func:`torch_rng` states are one."""
    return all(x is y or torch.equal(x, y) for x, y in zip(a, b, strict=True))
