r"""Which dimension of a weight a model's matrix products sum over: the weight's input units.

A dropout mask drops a weight's input units, the dimension its matrix product sums over. The
library's layers and Pyro's ``nn.Linear`` store weights ``[out, in]`` (``F.linear(x, w)``, which
sums over ``w``'s last dim); NumPyro's ``examples/bnn.py`` and many raw models store them
``[in, out]`` and write ``x @ w``, which sums over ``w``'s first. :class:`ProductWatch` records,
while the guide is set up, the summed dimension of every tensor a product reads
(``torch.matmul`` and ``@``, ``mm``, ``bmm``, ``F.linear``, and ``einsum``, through a transposed
view too), so that :class:`~pyro_dropout.guides.DropoutGuide` masks the rows of a weight used as
``x @ w`` without a declaration (an explicit ``infer={"dropout_dim": ...}`` still wins).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

__all__ = ["ProductWatch", "declare_input_rows"]

_PRODUCTS = {torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__, torch.mm, torch.Tensor.mm}
_PRODUCTS |= {torch.bmm, torch.Tensor.bmm}


def _einsum_dims(equation: str, operands: tuple) -> list[tuple[Any, int]]:
    """``(operand, summed dim)`` of each 2-d operand of an explicit ``einsum`` that sums over one of
    its two dims (``"ni,io->no"``: the second operand's dim -2)."""
    if "->" not in equation or "." in equation:
        return []
    inputs, output = equation.replace(" ", "").split("->")
    found = []
    for spec, operand in zip(inputs.split(","), operands, strict=False):
        summed = [i - len(spec) for i, letter in enumerate(spec) if letter not in output]
        if len(spec) == 2 and len(summed) == 1:
            found.append((operand, summed[0]))
    return found


class ProductWatch(TorchFunctionMode):
    """Within the mode, ``contracted[id(tensor)]`` is the (negative) dim of ``tensor`` that the
    first matrix product reading it summed over."""

    def __init__(self) -> None:
        super().__init__()
        self.contracted: dict[int, int] = {}

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func in _PRODUCTS and len(args) >= 2:
            self._note(args[0], -1)
            self._note(args[1], -2)
        elif func is F.linear and len(args) >= 2:
            self._note(args[1], -1)
        elif func is torch.einsum and args and isinstance(args[0], str):
            operands = tuple(args[1]) if len(args) == 2 and isinstance(args[1], list | tuple) else args[1:]
            for operand, dim in _einsum_dims(args[0], operands):
                self._note(operand, dim)
        return func(*args, **kwargs)

    def _note(self, t: Any, dim: int) -> None:
        if not isinstance(t, torch.Tensor) or t.dim() < 2:
            return
        self.contracted.setdefault(id(t), dim)
        base = t._base
        if base is not None and base.dim() == t.dim() and _transposed(t, base):  # w.T, w.t(), w.mT
            self.contracted.setdefault(id(base), -1 if dim == -2 else -2)


def _transposed(t: torch.Tensor, base: torch.Tensor) -> bool:
    """Whether the view ``t`` is ``base`` with its last two dims swapped."""
    return (
        tuple(t.shape[-2:]) == (base.shape[-1], base.shape[-2])
        and tuple(t.stride()[-2:]) == (base.stride(-1), base.stride(-2))
        and base.stride(-1) != base.stride(-2)
    )


def declare_input_rows(trace: Any, contracted: dict[int, int]) -> None:
    """Declare ``dropout_dim=-2`` on each weight matrix of ``trace`` that a product summed over by
    its rows (``x @ w``, stored ``[in, out]``), unless the site declares its own."""
    for _, site in trace.iter_stochastic_nodes():
        value, infer = site["value"], site["infer"]
        if site["fn"].event_dim == 2 and "dropout_dim" not in infer and contracted.get(id(value)) == -2:
            infer["dropout_dim"] = -2
