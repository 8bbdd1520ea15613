"""Recording a loss as a TorchScript trace, freed with its result, and cleaning the trace up."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

__all__ = ["simplify", "trace_loss"]


def simplify(graph: Any) -> None:
    """Fold what a trace made per shape knows: sizes of its inputs, and the arithmetic on them and
    on constants (the minibatch scale, a prior's constants), then drop repeated and unused nodes."""
    internals: Any = torch._C
    internals._jit_pass_constant_propagation(graph)
    internals._jit_pass_peephole(graph, False)  # with shapes: a trace is made per input shape
    _drop_identity_views(graph)
    internals._jit_pass_cse(graph)
    internals._jit_pass_dce(graph)
    internals._jit_pass_constant_propagation(graph)


def _random_draws(graph: Any) -> int:
    """The number of random draws in ``graph``: simplifying must keep every one (an unused draw
    still moves the generator, and the draws after it must be eager's)."""
    return sum(1 for node in graph.nodes() if node.isNondeterministic())


_VIEWS = frozenset({"aten::expand", "aten::reshape", "aten::view"})


def _drop_identity_views(graph: Any) -> None:
    """Remove the views that keep their input's sizes (an ``expand`` to the shape a tensor
    already has, say): each would be a node of the backward pass, doing nothing."""
    for node in list(graph.nodes()):
        if node.kind() not in _VIEWS:
            continue
        source, out = node.inputsAt(0), node.output()
        before, after = source.type(), out.type()
        if not (isinstance(before, torch._C.TensorType) and isinstance(after, torch._C.TensorType)):
            continue
        sizes = before.varyingSizes()
        if sizes is not None and None not in sizes and sizes == after.varyingSizes():
            out.replaceAllUsesWith(source)
            node.destroy()


def trace_loss(
    fn: Callable[..., torch.Tensor], inputs: tuple, simplified: bool = True
) -> Callable[..., torch.Tensor]:
    """:func:`torch.jit.trace` of ``fn``, into a compilation unit freed with the result, and
    :func:`simplify`-ed (where this PyTorch lacks a pass of it, the trace as recorded).

    ``torch.jit.trace`` keeps every traced function in TorchScript's global compilation
    unit for the life of the process (about 14 MB for a small network's loss, measured
    with ``benchmarks/trace_memory.py``), so a process that fits many models grows without
    bound. The trace is made the same way, as the method of a module of its own; where
    this PyTorch lacks that internal route, the public function is used.
    """
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
    if simplified:
        draws = _random_draws(method.graph)
        try:
            simplify(method.graph)
        except (AttributeError, RuntimeError):  # a pass this PyTorch lacks, or one that failed
            return trace_loss(fn, inputs, simplified=False)
        if _random_draws(method.graph) != draws:  # a draw whose value is unused was dropped: the
            return trace_loss(fn, inputs, simplified=False)  # trace would draw other masks than eager

    def run(*tensors: torch.Tensor) -> torch.Tensor:
        return method(*tensors)

    run.keep = (unit, module)  # type: ignore[attr-defined]  # the method lives in them
    return run
