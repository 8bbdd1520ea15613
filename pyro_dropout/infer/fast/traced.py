"""Tracing a loss once per input shape: the helpers that :class:`CompiledSVI` and the losses'
``jit=True`` share (random state kept out of the trace, the key of a trace, the tracer)."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Hashable
from typing import Any

import torch
from pyro.util import get_rng_state, set_rng_state

from .compiled import compile_loss
from .frozen import changed_attribute, value_read_at

__all__ = [
    "TensorSlots",
    "TracedLoss",
    "call_key",
    "forked_rng",
    "rng_state",
    "set_rng_state_on",
    "static_key",
    "trace_loss",
]

MAX_RETRACES = 5  # changes of the modules' values that are always retraced, however frequent


def forked_rng(device: torch.device) -> Any:
    """Random draws inside leave PyTorch's random state as it was (on ``device`` too)."""
    return torch.random.fork_rng(devices=[device] if device.type == "cuda" else [])


def rng_state(device: torch.device) -> dict[str, Any]:
    state = get_rng_state()
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def set_rng_state_on(state: dict[str, Any], device: torch.device) -> None:
    set_rng_state(state)
    if device.type == "cuda" and "cuda" in state:
        torch.cuda.set_rng_state(state["cuda"], device)


def static_key(value: Any) -> Hashable:
    if isinstance(value, torch.Tensor):
        return ("tensor", tuple(value.shape), value.dtype, value.device)
    try:
        hash(value)
        return value
    except TypeError:
        return ("id", id(value))


def call_key(args: tuple, kwargs: dict) -> Hashable:
    """What a trace of a call with ``args`` and ``kwargs`` depends on: the tensors' shapes, dtypes
    and devices, and the other arguments' values."""
    return (
        tuple(static_key(a) for a in args),
        tuple(sorted((k, static_key(v)) for k, v in kwargs.items())),
    )


class TensorSlots:
    """Where the tensors sit among a call's arguments: a trace takes them as its inputs, and each
    call of the trace puts its input tensors back in the same places."""

    def __init__(self, args: tuple, kwargs: dict) -> None:
        self.positions = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
        self.names = [k for k, v in kwargs.items() if isinstance(v, torch.Tensor)]

    def tensors(self, args: tuple, kwargs: dict) -> tuple[torch.Tensor, ...]:
        return (*(args[i] for i in self.positions), *(kwargs[k] for k in self.names))

    def put(self, args: tuple, kwargs: dict, tensors: tuple[torch.Tensor, ...]) -> tuple[tuple, dict]:
        """``args`` and ``kwargs`` with ``tensors`` in the tensors' places."""
        call_args, call_kwargs = list(args), dict(kwargs)
        for i, t in zip(self.positions, tensors, strict=False):
            call_args[i] = t
        for k, t in zip(self.names, tensors[len(self.positions) :], strict=True):
            call_kwargs[k] = t
        return tuple(call_args), call_kwargs


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
        try:
            simplify(method.graph)
        except (AttributeError, RuntimeError):  # a pass this PyTorch lacks, or one that failed
            return trace_loss(fn, inputs, simplified=False)

    def run(*tensors: torch.Tensor) -> torch.Tensor:
        return method(*tensors)

    run.keep = (unit, module)  # type: ignore[attr-defined]  # the method lives in them
    return run


class TracedLoss:
    """``loss(*args, **kwargs)`` traced once per key (the shapes of the tensor arguments, the
    values of the others, and the Python values of the model's and guide's modules that
    ``state`` returns), the parameters ``params`` as the trace's first inputs: a call with new
    parameter tensors of the same shapes reuses the trace. Tracing runs the loss once on a
    forked random state, so the draws of training do not depend on when a trace is made.

    A loss that reads a tensor's value in Python (``if x.mean() > 0:``) is not traced: a
    warning names the line, and the loss runs eagerly from then on; so it does when the
    modules' attributes change at almost every call (:mod:`~pyro_dropout.infer.fast.frozen`).
    :meth:`retrace` drops the traces, after a change the key cannot see.

    ``mode="compile"`` compiles each trace with :func:`torch.compile`
    (:func:`~pyro_dropout.infer.fast.compiled.compile_loss`); where that fails, a warning says
    why and this object traces with :func:`torch.jit.trace` from then on."""

    def __init__(
        self,
        loss: Callable[..., torch.Tensor],
        mode: str = "trace",
        state: Callable[[], tuple] | None = None,
        owner: str = "jit=True",
    ) -> None:
        if mode not in ("trace", "compile"):
            raise ValueError(f"TracedLoss: mode must be 'trace' or 'compile', got {mode!r}")
        self.loss, self.mode, self.state, self.owner = loss, mode, state or tuple, owner
        self.traces: dict[Hashable, Callable[..., torch.Tensor]] = {}
        self.states: dict[Hashable, tuple] = {}  # the modules' values each call key was traced with
        self.retraces: dict[Hashable, int] = {}
        self.calls: dict[Hashable, int] = {}
        self.eager = ""  # why the loss runs eagerly ("" while it is traced)

    def retrace(self) -> None:
        """Drop every trace: the next call traces again (after changing a value the trace froze
        that the key does not see: a global, a closure, an attribute of a non-module object)."""
        self.traces.clear()
        self.states.clear()

    def __call__(self, params: list[torch.Tensor], args: tuple, kwargs: dict) -> torch.Tensor:
        if self.eager:
            return self.loss(*args, **kwargs)
        slots = TensorSlots(args, kwargs)
        shape_key = (tuple(p.requires_grad for p in params), call_key(args, kwargs))
        state = self.state()
        self.calls[shape_key] = self.calls.get(shape_key, 0) + 1
        traced = self.traces.get((shape_key, state))
        if traced is None:
            if not self._note_state(shape_key, state):
                return self.loss(*args, **kwargs)
            made = self._trace(params, args, kwargs, slots)
            if made is None:
                return self.loss(*args, **kwargs)
            traced = self.traces[(shape_key, state)] = made
        return traced(*params, *slots.tensors(args, kwargs))

    def _note_state(self, shape_key: Hashable, state: tuple) -> bool:
        """Record a new trace of ``shape_key`` for ``state``, dropping the one for the old state;
        ``False`` (and eager from now on) once the modules' values change at more than one call
        in ten: tracing costs more than it saves then."""
        old = self.states.get(shape_key)
        self.states[shape_key] = state
        if old is None:
            return True
        self.traces.pop((shape_key, old), None)
        self.retraces[shape_key] = self.retraces.get(shape_key, 0) + 1
        changes, calls = self.retraces[shape_key], self.calls[shape_key]
        if changes < MAX_RETRACES or changes * 10 <= calls:
            return True
        self._fall_back(
            f"{changed_attribute(old, state)} changed at {changes} of {calls} calls, and each change needs "
            "a new trace"
        )
        return False

    def _fall_back(self, why: str) -> None:
        self.eager = why
        self.retrace()
        warnings.warn(
            f"{self.owner}: {why}; the loss runs eagerly from now on (jit=False: no trace at all)",
            stacklevel=5,
        )

    def _trace(
        self, params: list[torch.Tensor], args: tuple, kwargs: dict, slots: TensorSlots
    ) -> Callable[..., torch.Tensor] | None:
        def loss_of(*inputs: torch.Tensor) -> torch.Tensor:
            call_args, call_kwargs = slots.put(args, kwargs, inputs[len(params) :])
            return self.loss(*call_args, **call_kwargs)

        inputs = (*params, *slots.tensors(args, kwargs))
        with forked_rng(params[0].device):
            with torch.no_grad():  # once eagerly: the checks made once per input shape (the batching
                self.loss(*args, **kwargs)  # self-check reads values) are done before recording
            where = value_read_at(loss_of, inputs)
            if where is not None:
                self._fall_back(
                    f"the loss reads a tensor's value in Python at {where}, and a trace would keep the "
                    "branch of the first inputs"
                )
                return None
            if self.mode == "compile":
                compiled, why = compile_loss(loss_of, inputs, len(params))
                if compiled is not None:
                    return compiled
                self.mode = "trace"
                warnings.warn(f"jit='compile': {why}; tracing with torch.jit.trace instead", stacklevel=5)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # shape comparisons: a trace is made per shape
                return trace_loss(loss_of, inputs)
