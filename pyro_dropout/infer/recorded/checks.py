r"""Spot checks of a recorded graph against the loss run eagerly: what no key can see, by its effect.

A global, a closure's variable or a number from Python's random generator is frozen into a graph
unseen. So at its calls 1, 2, 4, ..., 32 and then every :data:`CHECK_EVERY`\ th, the loss also runs
eagerly from the random state the graph's call started from (the same masks): its value and its
gradient must be the graph's. Where they differ the graph is stale: the caller records it again
and warns, so a stale graph trains at most ``CHECK_EVERY - 1`` steps. A check costs an eager step.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

__all__ = ["CHECK_EVERY", "SpotChecks", "same", "set_torch_rng", "torch_rng"]

CHECK_EVERY = 64  # the longest interval between two checks, in the graph's calls
RTOL = 1e-3  # the graph's and the eager loss's values and gradients agree to this, relative to their size


def torch_rng(device: torch.device) -> tuple[Any, Any]:
    return torch.get_rng_state(), torch.cuda.get_rng_state(device) if device.type == "cuda" else None


def set_torch_rng(state: tuple[Any, Any], device: torch.device) -> None:
    torch.set_rng_state(state[0])
    if state[1] is not None:
        torch.cuda.set_rng_state(state[1], device)


def same(value: torch.Tensor, expected: torch.Tensor) -> bool:
    """Whether two values (or gradients) agree to :data:`RTOL` of the expected's size."""
    finite = expected[torch.isfinite(expected)]
    scale = max(1.0, float(finite.abs().max())) if finite.numel() else 1.0
    return value.shape == expected.shape and torch.allclose(
        value, expected, rtol=RTOL, atol=RTOL * scale, equal_nan=True
    )


def _gradients(value: torch.Tensor, params: tuple[torch.Tensor, ...]) -> list[torch.Tensor]:
    wanted = [p for p in params if p.requires_grad]
    grads = (
        torch.autograd.grad(value, wanted, retain_graph=True, allow_unused=True)
        if value.requires_grad
        else ()
    )
    return [torch.zeros_like(p) if g is None else g for p, g in zip(wanted, grads, strict=False)]


class SpotChecks:
    """When the next check is due, and the check itself (``stale`` is why the last check failed)."""

    def __init__(self) -> None:
        self.calls, self.due, self.stale = 0, 1, ""

    def restart(self) -> None:
        """After a new recording: check it from its first calls again."""
        self.calls, self.due = 0, 1

    def run(
        self,
        graph: Callable[..., torch.Tensor],
        inputs: tuple,
        num_params: int,
        eager: Callable[[], torch.Tensor],
    ) -> torch.Tensor:
        """``graph(*inputs)``; at a due call also ``eager()`` from the same random state, its value
        and gradients compared (``stale`` says how they differ, "" where they agree)."""
        self.calls += 1
        self.stale = ""
        if self.calls != self.due:
            return graph(*inputs)
        self.due = self.calls * 2 if self.calls < CHECK_EVERY // 2 else self.calls + CHECK_EVERY
        device = inputs[0].device if inputs else torch.device("cpu")
        state = torch_rng(device)
        value = graph(*inputs)
        params = tuple(inputs[:num_params])
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            set_torch_rng(state, device)
            expected = eager()
        if not same(value.detach(), expected.detach()):
            self.stale = f"the graph gave {_show(value)} where the loss run eagerly gives {_show(expected)}"
        elif not all(
            same(a, b) for a, b in zip(_gradients(value, params), _gradients(expected, params), strict=True)
        ):
            self.stale = "the graph's gradient differs from the eager loss's on the same draws"
        return value


def _show(value: torch.Tensor) -> str:
    return f"{float(value.detach()):.8g}" if value.numel() == 1 else f"a tensor of shape {tuple(value.shape)}"
