"""Recording a loss as a TorchScript trace, freed with its result, and cleaning the trace up."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from .folding import (
    constant_value,
    fold_affine_sum,
    fold_negated_difference,
    fold_scale_into_addcdiv,
    same_sizes,
    same_type,
)
from .penalty_fold import fold_penalty_sum
from .spot_check import same_rng, set_torch_rng, torch_rng

__all__ = ["simplify", "trace_loss"]


def simplify(graph: Any) -> None:
    """Fold what a trace made per shape knows: sizes of its inputs, and the arithmetic on them and
    on constants (the minibatch scale, a prior's constants), then drop repeated and unused nodes."""
    internals: Any = torch._C
    internals._jit_pass_constant_propagation(graph)
    internals._jit_pass_peephole(graph, False)  # with shapes: a trace is made per input shape
    _drop_identity_views(graph)
    _drop_identity_arithmetic(graph)
    internals._jit_pass_cse(graph)
    _fold_scaled_squares(graph)
    internals._jit_pass_dce(graph)
    internals._jit_pass_constant_propagation(graph)
    fold_scale_into_addcdiv(graph)  # on the constants folded so far
    fold_penalty_sum(graph)
    fold_affine_sum(graph)
    fold_negated_difference(graph)
    internals._jit_pass_dce(graph)


_VIEWS = frozenset({"aten::expand", "aten::reshape", "aten::view"})


def _drop_identity_views(graph: Any) -> None:
    """Remove the views that keep their input's sizes (an ``expand`` to the shape a tensor
    already has, say): each would be a node of the backward pass, doing nothing."""
    for node in list(graph.nodes()):
        if node.kind() not in _VIEWS:
            continue
        source, out = node.inputsAt(0), node.output()
        if same_sizes(source, out):
            out.replaceAllUsesWith(source)
            node.destroy()


# arithmetic that returns its tensor unchanged: (kind, the constant's value, where it may stand)
_IDENTITIES = {
    "aten::sub": (0.0, (1,)),
    "aten::add": (0.0, (0, 1)),
    "aten::mul": (1.0, (0, 1)),
    "aten::div": (1.0, (1,)),
}


def _drop_identity_arithmetic(graph: Any) -> None:
    """Remove ``x - 0``, ``x + 0``, ``x * 1`` and ``x / 1`` where the constant is a tensor that does
    not widen ``x`` or change its dtype (a prior's zero mean; Pyro's scale of one on a site): each
    a node of the forward and of the backward pass, doing nothing."""
    for node in list(graph.nodes()):
        identity = _IDENTITIES.get(node.kind())
        if identity is None or node.inputsSize() < 2:
            continue
        value, places = identity
        for place in places:
            other = constant_value(node.inputsAt(place))
            if isinstance(other, torch.Tensor) and bool((other == value).all()):
                if place == 0 and node.kind() == "aten::add" and constant_value(node.inputsAt(2)) != 1:
                    continue  # 0 + alpha * x is x only for alpha = 1
                source = node.inputsAt(1 - place)
                if same_type(source, node.output()):
                    node.output().replaceAllUsesWith(source)
                    node.destroy()
                    break


def _fold_scaled_squares(graph: Any) -> None:
    """``addcmul(x * x, x, x, value=r)``, the KL's ``(m - mu)^2 + r m^2`` once the zero mean is
    gone, as ``(x * x) * (1 + r)``: the backward of one scalar product instead of addcmul's three
    inputs (about 10 microseconds a weight on a CPU)."""
    for node in list(graph.nodes()):
        if node.kind() != "aten::addcmul" or node.inputsSize() != 4:
            continue
        square, left, right, ratio = (node.inputsAt(i) for i in range(4))
        inner = square.node()
        same = left.unique() == right.unique() and inner.kind() == "aten::mul" and inner.inputsSize() == 2
        same = same and all(inner.inputsAt(i).unique() == left.unique() for i in range(2))
        value = constant_value(ratio)
        if not same or not isinstance(value, float | int) or isinstance(value, bool):
            continue
        with graph.insert_point_guard(node):  # the insert point is restored: node goes below
            factor = graph.insertConstant(1.0 + float(value))
            scaled = graph.create("aten::mul", [square, factor])
            graph.insertNode(scaled)
        scaled.output().setType(node.output().type())
        node.output().replaceAllUsesWith(scaled.output())
        node.destroy()


def trace_loss(
    fn: Callable[..., torch.Tensor], inputs: tuple, simplified: bool = True
) -> Callable[..., torch.Tensor]:
    """:func:`torch.jit.trace` of ``fn``, into a compilation unit freed with the result, and
    :func:`simplify`-ed where the clean trace computes what the recorded one does: the same value
    from the same random state, leaving the generator where the recorded trace leaves it (a pass
    that drops or moves a draw would give every later mask another value), else as recorded (so
    too where this PyTorch lacks a pass). Run it under a forked random state: it draws.

    ``torch.jit.trace`` keeps every traced function in TorchScript's global compilation
    unit for the life of the process (about 14 MB for a small network's loss, measured
    with ``benchmarks/trace_memory.py``), so a process that fits many models grows without
    bound. The trace is made the same way, as the method of a module of its own; where
    this PyTorch lacks that internal route, the public function is used.
    """
    recorded = _record(fn, inputs, clean=False)
    if not simplified or not hasattr(recorded, "keep"):
        return recorded
    try:
        lean = _record(fn, inputs, clean=True)
        same = _same_draws(recorded, lean, inputs)
    except Exception:  # a pass this PyTorch lacks, or one that failed: the recording is exact
        return recorded
    return lean if same else recorded


def _record(fn: Callable[..., torch.Tensor], inputs: tuple, clean: bool) -> Callable[..., torch.Tensor]:
    internals: Any = torch._C  # TorchScript's internals carry no type hints for these
    unit = internals.CompilationUnit()
    try:
        module = internals.ScriptModule("__torch__.pyro_dropout.CompiledLoss", unit, True)
        module._create_method_from_trace(
            "forward", fn, inputs, lambda var: "", False, False, [], store_inputs=False
        )
    except (AttributeError, TypeError):
        return torch.jit.trace(fn, inputs, check_trace=False)
    method = module.forward
    if clean:
        simplify(method.graph)

    def run(*tensors: torch.Tensor) -> torch.Tensor:
        return method(*tensors)

    run.keep = (unit, module)  # type: ignore[attr-defined]  # the method lives in them
    return run


def _same_draws(first: Callable, second: Callable, inputs: tuple) -> bool:
    """Whether ``first`` and ``second`` give the same outputs from one random state, and leave
    the generator in one state."""
    device = next((t.device for t in inputs if isinstance(t, torch.Tensor)), torch.device("cpu"))
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []), torch.no_grad():
        start = torch_rng(device)
        a, after_a = first(*inputs), torch_rng(device)
        set_torch_rng(start, device)
        b, after_b = second(*inputs), torch_rng(device)
    return same_rng(after_a, after_b) and _close(a, b)


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and bool(torch.allclose(a, b, rtol=1e-5, atol=1e-6, equal_nan=True))
    if isinstance(a, tuple | list) and isinstance(b, tuple | list) and len(a) == len(b):
        return all(_close(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)
