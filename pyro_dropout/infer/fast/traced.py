"""Tracing a loss once per input shape: the helpers that :class:`CompiledSVI` and the losses'
``jit=True`` share (random state kept out of the trace, the key of a trace, the tracer)."""

from __future__ import annotations

import inspect
import warnings
import weakref
from collections.abc import Callable, Hashable
from typing import Any

import torch
from pyro.util import get_rng_state, set_rng_state

from .compiled import compile_loss
from .frozen import changed_attribute, value_read_at
from .recording import trace_loss
from .spot_check import SpotChecks, same_loss, same_rng, set_torch_rng, torch_rng

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
AUTO_AFTER = 32  # mode="auto": the eager calls of an input shape before it is traced
# mode="compile": the first input shape compiles at its first call; a later one (the short last
# batch of an epoch, an evaluation batch) runs its trace, and is compiled once it has been called
# this many times. Compiling a shape takes 6-30 s (benchmarks/compile_cost.py); a traced step costs
# 0.1-0.5 ms more than a compiled one on the UCI net and 5 ms more on the wide net
# (benchmarks/svi_step.py), so a shape seen once an epoch would not repay it
COMPILE_AFTER = 1000


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


def _weak(fn: Callable) -> Callable[[], Any]:
    """A reference to ``fn`` that keeps a method's object alive no longer than its other users
    do: the object owns this tracer, and a cycle would keep its model and guide alive (and a
    later guide of the same names would then not take the store's values)."""
    if inspect.ismethod(fn):
        return weakref.WeakMethod(fn)
    return lambda: fn


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

    ``mode="compile"`` compiles the first input shape's trace with :func:`torch.compile`
    (:func:`~pyro_dropout.infer.fast.compiled.compile_loss`), and another shape's once it has
    been called :data:`COMPILE_AFTER` times (traced until then: a new batch size never waits for
    the compiler); where compiling fails, a warning says why and this object traces with
    :func:`torch.jit.trace` from then on. ``mode="auto"`` (the
    losses' default) traces an input shape once it has run eagerly :data:`AUTO_AFTER` times (short
    fits, and shapes seen rarely, never pay for a trace), and where it cannot trace it runs eagerly
    without a warning. In every mode the traces are spot-checked against the eager loss
    (:mod:`~pyro_dropout.infer.fast.spot_check`)."""

    def __init__(
        self,
        loss: Callable[..., torch.Tensor],
        mode: str = "trace",
        state: Callable[[], tuple] | None = None,
        owner: str = "jit=True",
    ) -> None:
        if mode not in ("trace", "compile", "auto"):
            raise ValueError(f"TracedLoss: mode must be 'trace', 'compile' or 'auto', got {mode!r}")
        self.auto = mode == "auto"
        self._loss, self._state = _weak(loss), _weak(state or tuple)
        self.mode, self.owner = "trace" if self.auto else mode, owner
        self.traces: dict[Hashable, Callable[..., torch.Tensor]] = {}
        self.states: dict[Hashable, tuple] = {}  # the modules' values each call key was traced with
        self.retraces: dict[Hashable, int] = {}
        self.calls: dict[Hashable, int] = {}
        self.compiled: set[Hashable] = set()  # mode="compile": the input shapes compiled
        self.waiting: set[Hashable] = set()  # and those traced until COMPILE_AFTER calls
        self.checks = SpotChecks(owner)
        self.eager = ""  # why the loss runs eagerly ("" while it is traced)

    @property
    def loss(self) -> Callable[..., torch.Tensor]:
        return self._loss()

    @property
    def state(self) -> Callable[[], tuple]:
        return self._state()

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
        calls = self.calls[shape_key] = self.calls.get(shape_key, 0) + 1
        traced = self.traces.get((shape_key, state))
        if traced is None or (shape_key in self.waiting and calls > COMPILE_AFTER):
            if self.auto and calls <= AUTO_AFTER:
                return self.loss(*args, **kwargs)
            if traced is None and not self._note_state(shape_key, state):
                return self.loss(*args, **kwargs)
            made = self._trace(params, args, kwargs, slots, self._compile_now(shape_key, calls))
            if made is None:
                return self.loss(*args, **kwargs)
            traced = self.traces[(shape_key, state)] = made
            self.checks.restart()
        inputs = (*params, *slots.tensors(args, kwargs))
        return self.checks.run(traced, inputs, lambda: self.loss(*args, **kwargs))

    def _compile_now(self, shape_key: Hashable, calls: int) -> bool:
        """Whether the trace about to be made is compiled (``mode="compile"``): the first input
        shape's, a shape compiled before, or one called more than :data:`COMPILE_AFTER` times."""
        if self.mode != "compile":
            return False
        if self.compiled and shape_key not in self.compiled and calls <= COMPILE_AFTER:
            self.waiting.add(shape_key)
            return False
        self.waiting.discard(shape_key)
        self.compiled.add(shape_key)
        return True

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
        if self.auto:  # eager is what the caller asked for where tracing does not pay or is not exact
            return
        warnings.warn(
            f"{self.owner}: {why}; the loss runs eagerly from now on (jit=False: no trace at all)",
            stacklevel=5,
        )

    def _trace(
        self, params: list[torch.Tensor], args: tuple, kwargs: dict, slots: TensorSlots, compiling: bool
    ) -> Callable[..., torch.Tensor] | None:
        def loss_of(*inputs: torch.Tensor) -> torch.Tensor:
            call_args, call_kwargs = slots.put(args, kwargs, inputs[len(params) :])
            return self.loss(*call_args, **call_kwargs)

        inputs = (*params, *slots.tensors(args, kwargs))
        device = params[0].device
        with forked_rng(device):
            with torch.no_grad():  # once eagerly: the checks made once per input shape (the batching
                self.loss(*args, **kwargs)  # self-check reads values) are done before recording
            made = self._record(loss_of, inputs, len(params), compiling)
            if made is None or self._draws_apart(made, inputs, args, kwargs):
                return None
            return made

    def _draws_apart(self, made: Callable, inputs: tuple, args: tuple, kwargs: dict) -> bool:
        """Whether the trace, from the eager loss's random state, gives another value or leaves the
        generator elsewhere (a draw whose value is unused, which the tracer drops): then every
        later mask would differ from the eager loss's, and the loss runs eagerly."""
        device = inputs[0].device
        start = torch_rng(device)
        with torch.no_grad():  # eager again: the first eager run may have drawn for the checks made
            expected, after = self.loss(*args, **kwargs), torch_rng(device)  # once per input shape
            set_torch_rng(start, device)
            value = made(*inputs)
        if same_loss(value.detach(), expected.detach()) and same_rng(after, torch_rng(device)):
            return False
        self._fall_back(
            "the trace draws other random numbers than the loss run eagerly (a draw whose value is unused?)"
        )
        return True

    def _record(
        self, loss_of: Callable, inputs: tuple, num_params: int, compiling: bool
    ) -> Callable[..., torch.Tensor] | None:
        """The trace (compiled if ``compiling``) of ``loss_of``; ``None`` where the loss must run
        eagerly."""
        where = value_read_at(loss_of, inputs)
        if where is not None:
            self._fall_back(
                f"the loss reads a tensor's value in Python at {where}, and a trace would keep the "
                "branch of the first inputs"
            )
            return None
        if compiling:
            compiled, why = compile_loss(loss_of, inputs, num_params)
            if compiled is not None:
                return compiled
            self.mode = "trace"
            warnings.warn(f"jit='compile': {why}; tracing with torch.jit.trace instead", stacklevel=5)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # shape comparisons: a trace is made per shape
            try:
                return trace_loss(loss_of, inputs)
            except Exception as error:  # what the tracer cannot record: the eager loss is exact
                if not self.auto:
                    raise
                self._fall_back(f"tracing failed ({type(error).__name__})")
                return None
