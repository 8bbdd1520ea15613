r"""What a recorded graph cannot see, found by its effect (docs/design.md, "One fast path"):
:class:`ValueReads`, a read of a tensor's value in Python, whose branch a graph would freeze;
:class:`SpotChecks`, a changed global or closure, by the eager loss from the graph's random state at
its calls 1, 2, 4, ..., 32 and then every :data:`CHECK_EVERY`\ th (a stale graph trains at most
``CHECK_EVERY - 1`` steps)."""

from __future__ import annotations

import os
import sysconfig
import traceback
from collections.abc import Callable
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

__all__ = ["CHECK_EVERY", "SpotChecks", "ValueReads", "same", "set_torch_rng", "side_by_side", "torch_rng"]

CHECK_EVERY = 64  # the longest interval between two checks, in the graph's calls
RTOL = 1e-3  # the graph's and the eager loss's values and gradients agree to this, relative to their size
_READS = {
    *(getattr(torch.Tensor, f"__{kind}__") for kind in ("bool", "float", "int", "index", "complex")),
    torch.Tensor.item,
    torch.Tensor.tolist,
}  # shapes (x.shape[0], len(x)) are not values: a graph is recorded per input shape
_LIBRARIES = (
    os.path.dirname(torch.__file__ or "") + os.sep,
    sysconfig.get_paths()["stdlib"] + os.sep,
    *(os.path.dirname(m.__file__ or "") + os.sep for m in (__import__("pyro"), __import__("pyro_dropout"))),
)


def torch_rng(device: torch.device) -> tuple[Any, Any]:
    return torch.get_rng_state(), torch.cuda.get_rng_state(device) if device.type == "cuda" else None


def set_torch_rng(state: tuple[Any, Any], device: torch.device) -> None:
    torch.set_rng_state(state[0])
    if state[1] is not None:
        torch.cuda.set_rng_state(state[1], device)


def side_by_side(first: Callable[[], Any], second: Callable[[], Any], device: torch.device) -> tuple:
    """``first()``, then ``second()`` from the random state ``first`` started from, and whether the
    generator ends where ``first`` left it (a graph that dropped an unused draw would not)."""
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
    grads = (
        torch.autograd.grad(value, wanted, retain_graph=True, allow_unused=True)
        if value.requires_grad
        else ()
    )
    return [torch.zeros_like(p) if g is None else g for p, g in zip(wanted, grads, strict=False)]


class SpotChecks:
    """When the next check is due, and the check itself (``stale`` is why the last check failed);
    made anew for each new recording."""

    def __init__(self) -> None:
        self.calls, self.due, self.stale = 0, 1, ""

    def run(self, graph: Callable, inputs: tuple, num_params: int, eager: Callable) -> torch.Tensor:
        """``graph(*inputs)``; at a due call also ``eager()`` from the same random state, compared
        (``stale`` says how they differ, "" where they agree); the eager loss's value is returned."""
        self.calls += 1
        self.stale = ""
        if self.calls != self.due:
            return graph(*inputs)
        self.due = self.calls * 2 if self.calls < CHECK_EVERY // 2 else self.calls + CHECK_EVERY
        device = inputs[0].device if inputs else torch.device("cpu")
        value, expected, same_draws = side_by_side(lambda: graph(*inputs), eager, device)
        params = tuple(inputs[:num_params])
        if not same(value.detach(), expected.detach()):
            self.stale = f"the graph gave {_show(value)} where the loss run eagerly gives {_show(expected)}"
        elif not same_draws:
            self.stale = "the graph drew other random numbers than the eager loss"
        elif not all(map(same, _gradients(value, params), _gradients(expected, params))):
            self.stale = "the graph's gradient differs from the eager loss's on the same draws"
        return expected if self.stale else value


def _show(value: torch.Tensor) -> str:
    return f"{float(value.detach()):.8g}" if value.numel() == 1 else f"a tensor of shape {tuple(value.shape)}"


def _user_line() -> str:
    """The innermost frame outside PyTorch, Pyro, this library and Python (the user's code), else
    the innermost outside PyTorch."""
    frames = traceback.extract_stack()[:-2]
    for outside in (_LIBRARIES, _LIBRARIES[:2]):
        mine = [f for f in frames if not f.filename.startswith((*outside, "<"))]
        if mine:
            return f"{mine[-1].filename}:{mine[-1].lineno} ({(mine[-1].line or '').strip()})"
    return "a line the stack does not show"


class ValueReads(TorchFunctionMode):
    """Within the mode, ``first`` is where a tensor's value was first read into Python (``__bool__``,
    ``__float__``, ``item``, ...), as "file:line (code)" of the user's code; None: nowhere."""

    def __init__(self) -> None:
        super().__init__()
        self.first: str | None = None

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: Any = None) -> Any:
        if self.first is None and func in _READS:
            self.first = _user_line()
        return func(*args, **(kwargs or {}))
