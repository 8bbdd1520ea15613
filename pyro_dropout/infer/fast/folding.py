"""Folds of a traced loss's scalar arithmetic into fewer differentiable operations, and the
helpers that read a graph's constants (the KL's sum over sites is folded in
:mod:`~pyro_dropout.infer.fast.penalty_fold`).

On a small network every differentiable operation of a traced step is a node of the backward pass
that costs a few microseconds whatever its size (``benchmarks/svi_step.py``): a KL term's factor
applied to every weight, the likelihood's constants and the minibatch scale applied to every
element before a sum, and the negated ELBO outweigh their arithmetic. Each fold keeps the value
to rounding; :func:`~pyro_dropout.infer.fast.recording.trace_loss` keeps a folded trace only where
it runs and gives the recorded value.
"""

from __future__ import annotations

import math
from typing import Any

import torch

__all__ = [
    "constant_value",
    "fold_affine_sum",
    "fold_negated_difference",
    "fold_scale_into_addcdiv",
    "known_sizes",
    "number",
    "same_sizes",
    "same_type",
    "scalar",
    "scalar_tensor",
    "single_use",
]


def constant_value(value: Any) -> Any:
    """The value of a graph constant, or None for a value computed in the graph."""
    return value.toIValue() if value.node().kind() == "prim::Constant" else None


def number(value: Any) -> float | None:
    """A graph constant that is a finite Python number (not a bool), as a float."""
    found = constant_value(value)
    if isinstance(found, bool) or not isinstance(found, float | int) or not math.isfinite(found):
        return None
    return float(found)


def scalar_tensor(value: Any) -> torch.Tensor | None:
    """A graph constant that is a floating tensor of one element."""
    tensor = constant_value(value)
    if isinstance(tensor, torch.Tensor) and tensor.numel() == 1 and tensor.is_floating_point():
        return tensor
    return None


def scalar(value: Any, integer_tensors: bool = False) -> float | None:
    """A graph constant that is a finite number (not a bool) or a finite 0-d floating tensor (or,
    with ``integer_tensors``, integer tensor too), as a float."""
    found = constant_value(value)
    if isinstance(found, torch.Tensor):
        if found.dim() != 0 or found.dtype == torch.bool or found.is_complex():
            return None
        if not (found.is_floating_point() or integer_tensors):
            return None
        found = found.item()
    if isinstance(found, bool) or not isinstance(found, float | int) or not math.isfinite(found):
        return None
    return float(found)


def single_use(value: Any) -> bool:
    """Whether one node uses ``value``."""
    return len(value.uses()) == 1


def known_sizes(value: Any) -> list[int] | None:
    """The sizes of a tensor value, where the graph knows all of them."""
    kind = value.type()
    sizes = kind.varyingSizes() if isinstance(kind, torch._C.TensorType) else None
    if sizes is None or None in sizes:
        return None
    return [size for size in sizes if size is not None]


def same_sizes(source: Any, out: Any) -> bool:
    """Whether ``source`` and ``out`` are tensors of the same sizes, all of them known."""
    sizes = known_sizes(source)
    return sizes is not None and sizes == known_sizes(out)


def same_type(source: Any, out: Any) -> bool:
    """Whether ``out`` has ``source``'s sizes (all known) and dtype."""
    return same_sizes(source, out) and source.type().scalarType() == out.type().scalarType() is not None


def fold_scale_into_addcdiv(graph: Any) -> None:
    """``addcdiv(c, sum(x * k), d, value=v)`` as ``addcdiv(c, sum(x), d, value=v * k)``: the KL
    of a weight's site, whose factor moves from a product over the weights into the scalar
    ``addcdiv`` that follows (one backward node fewer a weight)."""
    for node in list(graph.nodes()):
        if node.kind() != "aten::addcdiv" or node.inputsSize() != 4:
            continue
        summed, value = node.inputsAt(1), number(node.inputsAt(3))
        total = summed.node()
        if value is None or total.kind() != "aten::sum" or total.inputsSize() != 4 or not single_use(summed):
            continue
        product = total.inputsAt(0)
        scaled = product.node()
        factor = number(scaled.inputsAt(1)) if scaled.kind() == "aten::mul" else None
        if factor is None or not single_use(product) or constant_value(total.inputsAt(3)) is not None:
            continue
        if not _same_dtype(scaled.inputsAt(0), product):  # x * k may widen x's dtype
            continue
        total.replaceInput(0, scaled.inputsAt(0))
        with graph.insert_point_guard(node):
            node.replaceInput(3, graph.insertConstant(value * factor))
        scaled.destroy()


def _same_dtype(a: Any, b: Any) -> bool:
    kinds = [v.type().scalarType() if isinstance(v.type(), torch._C.TensorType) else None for v in (a, b)]
    return kinds[0] is not None and kinds[0] == kinds[1]


def fold_negated_difference(graph: Any) -> None:
    """``-(a - b)`` as ``b - a`` (the negated ELBO: one subtraction instead of two nodes)."""
    for node in list(graph.nodes()):
        if node.kind() != "aten::neg":
            continue
        difference = node.inputsAt(0)
        inner = difference.node()
        if inner.kind() != "aten::sub" or inner.inputsSize() != 3 or number(inner.inputsAt(2)) != 1.0:
            continue
        if not single_use(difference) or inner.output().type() != node.output().type():
            continue
        if not all(isinstance(inner.inputsAt(i).type(), torch._C.TensorType) for i in range(2)):
            continue  # a - 1.0 has no 1.0 - a
        with graph.insert_point_guard(node):
            swapped = graph.create("aten::sub", [inner.inputsAt(1), inner.inputsAt(0), inner.inputsAt(2)])
            graph.insertNode(swapped)
        swapped.output().setType(node.output().type())
        node.output().replaceAllUsesWith(swapped.output())
        node.destroy()


def _affine_step(node: Any) -> tuple[float, float, int] | None:
    """``(a, b, i)`` where ``node`` maps its input ``i``, ``x``, to ``a x + b`` by a constant
    scalar (``x * k``, ``k * x``, ``x / k``, ``x + k``, ``x - k``)."""
    kind, count = node.kind(), node.inputsSize()
    if kind == "aten::mul" and count == 2:
        for place in (1, 0):
            k = scalar(node.inputsAt(place))
            if k is not None:
                return k, 0.0, 1 - place
        return None
    k = scalar(node.inputsAt(1)) if count >= 2 else None
    if k is None:
        return None
    if kind == "aten::div" and count == 2 and k != 0.0:
        return 1.0 / k, 0.0, 0
    if kind in ("aten::add", "aten::sub") and count == 3 and number(node.inputsAt(2)) == 1.0:
        return 1.0, (k if kind == "aten::add" else -k), 0
    return None


def _scaled_after(node: Any) -> tuple[Any, float, float]:
    """The last of the constant affine steps applied to ``node``'s output one after another, each
    the one use of the one before, and their composite ``(a, b)`` (``node`` and ``(1, 0)`` for none)."""
    last, scale, shift = node, 1.0, 0.0
    while single_use(last.output()):
        use = last.output().uses()[0]
        step = _affine_step(use.user)
        if step is None or step[2] != use.offset or use.user.output().type() != last.output().type():
            break
        scale, shift, last = step[0] * scale, step[0] * shift + step[1], use.user
    return last, scale, shift


def fold_affine_sum(graph: Any) -> None:
    """``sum(s * (a * x - b)) / k`` and the like (a likelihood's constants, Pyro's minibatch scale,
    a mean over particles: each an operation on every element or on the sum) as
    ``c + a' * sum(x)``: two backward nodes."""
    for node in list(graph.nodes()):
        if (
            node.kind() != "aten::sum"
            or node.inputsSize() != 2
            or constant_value(node.inputsAt(1)) is not None
        ):
            continue
        scale, shift, value = 1.0, 0.0, node.inputsAt(0)
        while single_use(value) and (step := _affine_step(value.node())) is not None:
            # walking from the sum back to x: (a y + b) after y = c x + d is a c x + (a d + b)
            scale, shift = scale * step[0], scale * step[1] + shift
            value = value.node().inputsAt(step[2])
        if not _same_kind(value, node.inputsAt(0)):
            continue
        last, outer, added = _scaled_after(node)
        if value is node.inputsAt(0) and last is node:
            continue
        constant = outer * shift * math.prod(known_sizes(value) or []) + added
        _replace_by_add(graph, node, last, value, outer * scale, constant)


def _same_kind(source: Any, out: Any) -> bool:
    """Whether ``source`` and ``out`` are floating tensors of one dtype and the same known sizes."""
    return same_type(source, out) and source.type().scalarType() in ("Float", "Double", "Half", "BFloat16")


def _replace_by_add(graph: Any, node: Any, last: Any, source: Any, scale: float, constant: float) -> None:
    """``node`` (a sum) of ``source`` instead, and ``constant + scale * sum`` in the place of
    ``last`` (``node`` or the last step after it)."""
    dtype, device = source.type().dtype(), source.type().device()
    node.replaceInput(0, source)
    with graph.insert_point_guard(node):  # the constants go before the sum, the addition after
        shift = graph.insertConstant(torch.tensor(constant, dtype=dtype, device=device))
        factor = graph.insertConstant(scale)
    total = graph.create("aten::add", [shift, node.output(), factor]).insertAfter(last)
    total.output().setType(last.output().type())
    last.output().replaceAllUsesWith(total.output())
    total.replaceInput(1, node.output())  # where last is node, the line above made it total's own output
