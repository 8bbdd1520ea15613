r"""Where a loss reads a tensor's value into Python: what a recorded graph would freeze.

A graph recorded from one call keeps the branch the Python took on that call's values
(``if x.mean() > 0:``, ``int(t)``, ``t.item()``). :func:`value_read_at` runs the loss once under
:class:`ValueReads`, a :class:`~torch.overrides.TorchFunctionMode` that sees every conversion of a
tensor to a Python value (``__bool__``, ``__float__``, ``__int__``, ``__index__``, ``item``,
``tolist``) and the line of the user's code that made it; shapes (``x.shape[0]``, ``len(x)``) are
not values, as a graph is recorded per input shape.
"""

from __future__ import annotations

import os
import sysconfig
import traceback
from collections.abc import Callable
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

__all__ = ["ValueReads", "value_read_at"]

_READS = {
    torch.Tensor.__bool__,
    torch.Tensor.__float__,
    torch.Tensor.__int__,
    torch.Tensor.__index__,
    torch.Tensor.__complex__,
    torch.Tensor.item,
    torch.Tensor.tolist,
}
_LIBRARIES = (
    os.path.dirname(torch.__file__ or "") + os.sep,
    sysconfig.get_paths()["stdlib"] + os.sep,
    *(os.path.dirname(m.__file__ or "") + os.sep for m in (__import__("pyro"), __import__("pyro_dropout"))),
)


def _user_line() -> str:
    """The innermost frame outside PyTorch, Pyro, this library and Python itself (the user's code),
    else the innermost outside PyTorch."""
    frames = traceback.extract_stack()[:-2]
    for outside in (_LIBRARIES, _LIBRARIES[:2]):
        mine = [f for f in frames if not f.filename.startswith((*outside, "<"))]
        if mine:
            f = mine[-1]
            return f"{f.filename}:{f.lineno} ({(f.line or '').strip()})"
    return "a line the stack does not show"


class ValueReads(TorchFunctionMode):
    """Within the mode, ``first`` is where the first tensor value was read into Python (None: none)."""

    def __init__(self) -> None:
        super().__init__()
        self.first: str | None = None

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: Any = None) -> Any:
        if self.first is None and func in _READS:
            self.first = _user_line()
        return func(*args, **(kwargs or {}))


def value_read_at(fn: Callable[[], Any]) -> str | None:
    """Where ``fn()`` reads a tensor's value into Python ("file:line (code)"), or ``None``. Run it
    under a forked random state: the call draws masks."""
    with ValueReads() as reads, torch.no_grad():
        fn()
    return reads.first
