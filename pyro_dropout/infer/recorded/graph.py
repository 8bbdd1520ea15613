r"""A loss recorded once per key and replayed: the one fast path of the losses and ``CompiledSVI``
(docs/design.md, "One fast path"). The key: input shapes, other arguments' values, the modules'
Python values (:mod:`~.state`); the parameters are the graph's first inputs. Where a graph cannot be
exact the loss runs eagerly; every graph is spot-checked (:mod:`~.checks`), a stale one recorded again.
"""

from __future__ import annotations

import warnings
import weakref
from collections.abc import Callable, Hashable
from typing import Any

import torch

from .checks import SpotChecks, ValueReads, same, side_by_side
from .record import record_loss
from .state import changed_attribute

__all__ = ["COMPILE_AFTER", "WARM_UP", "RecordedLoss", "TensorSlots", "call_key"]

WARM_UP = 32  # the losses' default: each input shape's eager calls before its graph is recorded
COMPILE_AFTER = 1000  # graph="compile": the calls of a later input shape before it is compiled
MAX_RERECORDS = 5  # changes of the modules' values always recorded anew, however frequent


def _static(value: Any) -> Hashable:
    if isinstance(value, torch.Tensor):
        return ("tensor", tuple(value.shape), value.dtype, value.device)
    try:
        hash(value)
        return value
    except TypeError:
        return ("id", id(value))


def call_key(args: tuple, kwargs: dict) -> Hashable:
    """What a graph of a call depends on: its tensors' shapes, dtypes and devices, other values."""
    return tuple(map(_static, args)), tuple(sorted((k, _static(v)) for k, v in kwargs.items()))


class TensorSlots:
    """Where the tensors sit among a call's arguments: the graph's inputs, put back in place."""

    def __init__(self, args: tuple, kwargs: dict) -> None:
        self.positions = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
        self.names = [k for k, v in kwargs.items() if isinstance(v, torch.Tensor)]

    def tensors(self, args: tuple, kwargs: dict) -> tuple[torch.Tensor, ...]:
        return (*(args[i] for i in self.positions), *(kwargs[k] for k in self.names))

    def put(self, args: tuple, kwargs: dict, tensors: tuple[torch.Tensor, ...]) -> tuple[tuple, dict]:
        call_args, call_kwargs = list(args), dict(kwargs)
        for i, t in zip(self.positions, tensors, strict=False):
            call_args[i] = t
        call_kwargs |= dict(zip(self.names, tensors[len(self.positions) :], strict=True))
        return tuple(call_args), call_kwargs


class RecordedLoss:
    """``loss(*args, **kwargs)`` recorded once per key (see the module's docs); ``warm_up``: the
    eager calls of each input shape before it is recorded; ``quiet``: run eagerly without a word
    where a graph cannot be exact (the losses' default); ``depth``: the calls between the user's
    line and this object's, where its warnings point."""

    def __init__(
        self,
        loss: Callable,
        mode: str,
        state: Callable,
        owner: str,
        warm_up: int = 0,
        quiet: bool = False,
        depth: int = 1,
    ) -> None:
        self._loss = weakref.WeakMethod(loss) if hasattr(loss, "__self__") else (lambda: loss)
        self.state, self.mode, self.owner, self.warm_up, self.quiet = state, mode, owner, warm_up, quiet
        self.depth = depth
        self.graphs: dict[Hashable, Callable] = {}
        self.states: dict[Hashable, tuple] = {}  # the modules' values each shape was recorded with
        self.calls: dict[Hashable, int] = {}
        self.rerecords: dict[Hashable, int] = {}
        self.compiled: set[Hashable] = set()
        self.checks = SpotChecks()
        self.eager = ""  # why the loss runs eagerly from now on ("" while it is recorded)

    @property
    def loss(self) -> Callable:
        found = self._loss()
        assert found is not None, "the loss's owner was collected"
        return found

    def retrace(self) -> None:
        """Drop every graph: the next call records again (after changing a value a graph froze that
        its key cannot see: a global, a closure, an attribute of an object that is not a module)."""
        self.graphs.clear()
        self.states.clear()

    def __call__(self, params: list[torch.Tensor], args: tuple, kwargs: dict) -> torch.Tensor:
        if self.eager:
            return self.loss(*args, **kwargs)
        slots = TensorSlots(args, kwargs)
        shape = (tuple(p.requires_grad for p in params), call_key(args, kwargs))
        state = self.state()
        calls = self.calls[shape] = self.calls.get(shape, 0) + 1
        graph = self.graphs.get((shape, state))
        # compiled: the first input shape, one compiled before, one called more than COMPILE_AFTER times
        compiling = self.mode == "compile" and (
            not self.compiled or shape in self.compiled or calls > COMPILE_AFTER
        )
        if graph is None or (compiling and shape not in self.compiled):
            if calls <= self.warm_up or (graph is None and not self._note_state(shape, state)):
                return self.loss(*args, **kwargs)
            if compiling:
                self.compiled.add(shape)
            graph = self._record(params, args, kwargs, slots, compiling)
            if graph is None:
                return self.loss(*args, **kwargs)
            self.graphs[(shape, state)] = graph
            self.checks.restart()
        inputs = (*params, *slots.tensors(args, kwargs))
        value = self.checks.run(graph, inputs, len(params), lambda: self.loss(*args, **kwargs))
        if self.checks.stale:
            self.graphs.pop((shape, state), None)  # recorded again at the next call
            warnings.warn(
                f"{self.owner}: {self.checks.stale} (call {self.checks.calls} of the graph): a value outside "
                "the model's and guide's modules (a global, a closure) changed; recorded again",
                stacklevel=2 + self.depth,
            )
        return value

    def _note_state(self, shape: Hashable, state: tuple) -> bool:
        """Note a recording of ``shape`` for ``state``; ``False`` (eager from now on) once the
        modules' values change at more than one call in ten: recording then costs more than it saves."""
        old, self.states[shape] = self.states.get(shape), state
        if old is None:
            return True
        self.graphs.pop((shape, old), None)
        changes = self.rerecords[shape] = self.rerecords.get(shape, 0) + 1
        if changes < MAX_RERECORDS or changes * 10 <= self.calls[shape]:
            return True
        self._fall_back(
            f"{changed_attribute(old, state)} changed at {changes} of {self.calls[shape]} calls", True
        )
        return False

    def _fall_back(self, why: str, loud: bool) -> None:
        """Eager from now on, saying ``why`` where ``loud``."""
        self.eager = why
        self.retrace()
        if loud:
            warnings.warn(
                f"{self.owner}: {why}; the loss runs eagerly from now on", stacklevel=4 + self.depth
            )

    def _record(self, params: list, args: tuple, kwargs: dict, slots: TensorSlots, compiling: bool) -> Any:
        """The graph of the loss at these arguments; None (eager from now on) where it cannot be exact."""

        def loss_of(*inputs: torch.Tensor) -> torch.Tensor:
            call_args, call_kwargs = slots.put(args, kwargs, inputs[len(params) :])
            return self.loss(*call_args, **call_kwargs)

        inputs, device = (*params, *slots.tensors(args, kwargs)), params[0].device
        loud = not self.quiet
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            with torch.no_grad():  # once eagerly: the checks made once per input shape, which read values
                self.loss(*args, **kwargs)
                with ValueReads() as reads:
                    self.loss(*args, **kwargs)
            if reads.first is not None:
                why = (
                    f"the loss reads a tensor's value in Python at {reads.first}, which a graph would freeze"
                )
                return self._fall_back(why, loud)
            graph, why = record_loss(loss_of, inputs, len(params), compiling)
            if graph is None and compiling:
                warnings.warn(
                    f"{self.owner}: {why}; the graph runs without compiling", stacklevel=3 + self.depth
                )
                graph, why = record_loss(loss_of, inputs, len(params), False)
            if graph is None:
                return self._fall_back(why, loud)
            with torch.no_grad():  # from the eager loss's random state: its value, its draws
                expected, value, same_draws = side_by_side(
                    lambda: self.loss(*args, **kwargs), lambda: graph(*inputs), device
                )
        if same_draws and same(value, expected):
            return graph
        return self._fall_back("the graph draws other random numbers than the loss run eagerly", loud)
