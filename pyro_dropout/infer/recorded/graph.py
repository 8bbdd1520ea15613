r"""A loss recorded once per key and replayed, the one fast path (docs/design.md): the key in
:mod:`~.state`, the parameters the graph's first inputs; eager where a graph cannot be exact; spot
checks in :mod:`~.checks`. :class:`GraphLoss` runs a Pyro objective's loss so in plain ``SVI``: its
first step eagerly (learning the parameters' names), the later ones on what ``pyro.param`` reads.
"""

from __future__ import annotations

import warnings
import weakref
from collections.abc import Callable, Hashable
from typing import Any, cast

import pyro
import torch
from pyro import poutine

from ..input_checks import check_not_empty, checked_outside
from .checks import SpotChecks, ValueReads, same, side_by_side
from .record import record_loss
from .state import StateWatch, call_key, changed_attribute, tensors_of, with_tensors

__all__ = ["COMPILE_AFTER", "WARM_UP", "GraphLoss", "RecordedLoss", "traced_parameters"]

WARM_UP = 32  # the losses' default: each input shape's eager calls before its graph is recorded
COMPILE_AFTER = 1000  # graph="compile": the calls of a later input shape before it is compiled
MAX_RERECORDS = 5  # changes of the modules' values always recorded anew, however frequent


class RecordedLoss:
    """``loss(*args, **kwargs)`` recorded once per key (see the module's docs); ``default``: a loss
    not asked for a graph, whose input shapes run eagerly :data:`WARM_UP` times before they are
    recorded and which runs eagerly without a word where a graph cannot be exact; ``depth``: the
    calls between the user's line and this object's, where its warnings point."""

    def __init__(
        self, loss: Callable, mode: str, state: Callable, owner: str, default: bool = False, depth: int = 1
    ) -> None:
        self._loss = weakref.WeakMethod(loss) if hasattr(loss, "__self__") else (lambda: loss)
        self.state, self.mode, self.owner, self.depth = state, mode, owner, depth
        self.warm_up, self.quiet = (WARM_UP, True) if default else (0, False)
        self.graphs: dict[Hashable, Callable] = {}
        self.states: dict[Hashable, tuple] = {}  # the modules' values each shape was recorded with
        self.calls: dict[Hashable, int] = {}
        self.rerecords: dict[Hashable, int] = {}
        self.compiled: set[Hashable] = set()
        self.checks = SpotChecks()
        self.eager = ""  # why the loss runs eagerly from now on ("" while it is recorded)

    @property
    def loss(self) -> Callable:
        return cast(Callable, self._loss())  # its owner, a GraphLoss, holds this object

    def retrace(self) -> None:
        """Drop every graph: the next call records again (after changing a value a graph froze that
        its key cannot see: a global, a closure, an attribute of an object that is not a module)."""
        self.graphs.clear()
        self.states.clear()

    def __call__(self, params: list[torch.Tensor], args: tuple, kwargs: dict) -> torch.Tensor:
        if self.eager:
            return self.loss(*args, **kwargs)
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
            graph = self._record(params, args, kwargs, compiling)
            if graph is None:
                return self.loss(*args, **kwargs)
            self.graphs[(shape, state)] = graph
            self.checks = SpotChecks()  # checked from its first calls again
        inputs = (*params, *tensors_of(args, kwargs))
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

    def _record(self, params: list, args: tuple, kwargs: dict, compiling: bool) -> Any:
        """The graph of the loss at these arguments; None (eager from now on) where it cannot be exact."""

        def loss_of(*inputs: torch.Tensor) -> torch.Tensor:
            call_args, call_kwargs = with_tensors(args, kwargs, inputs[len(params) :])
            return self.loss(*call_args, **call_kwargs)

        inputs, device, loud = (*params, *tensors_of(args, kwargs)), params[0].device, not self.quiet
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


def traced_parameters(objective: Any, model: Callable, guide: Callable, args: tuple, kwargs: dict) -> tuple:
    """The parameters ``objective.differentiable_loss(model, guide, ...)`` reads, by name and
    unconstrained (from its trace: with ``pyro.settings`` ``module_local_params=True`` they are not
    in the param store), and its value."""
    with poutine.trace(param_only=True) as capture:
        value = objective.differentiable_loss(model, guide, *args, **kwargs)
    nodes = capture.trace.nodes
    return {name: cast(Any, nodes[name]["value"]).unconstrained() for name in nodes}, value


class GraphLoss:
    """``objective.differentiable_loss(model, guide, ...)`` recorded once per key (``mode``:
    ``"record"`` or ``"compile"``; ``default``: the loss was not asked for a graph, so it warms up
    and stays quiet). ``owned``: the objective keeps this loss, so it is held weakly; ``owner`` and
    ``depth``: who warns, and the calls between the user's line and :attr:`recorded`'s (by default
    ``SVI.step``, ``loss_and_grads`` and this ``__call__``)."""

    def __init__(
        self,
        objective: Any,
        model: Callable,
        guide: Callable,
        mode: str,
        default: bool,
        owned: bool = False,
        owner: str = "",
        depth: int = 3,
    ) -> None:
        self._objective = weakref.ref(objective) if owned else lambda: objective
        self.model, self.guide, self.default = model, guide, default
        self.names: list[str] = []
        self.outside = False  # by default, with parameters outside the param store: eager
        owner = owner or type(objective).__name__ + ("" if default else f"(graph={mode!r})")
        state = StateWatch(model, guide)  # part of the key: the modules' Python values
        self.recorded = RecordedLoss(self._loss, mode, state, owner, default, depth)

    @property
    def objective(self) -> Any:
        return self._objective()

    def _loss(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        with pyro.validation_enabled(False), checked_outside():  # the step checks the inputs
            return self.objective.differentiable_loss(self.model, self.guide, *args, **kwargs)

    def _setup(self, args: tuple, kwargs: dict) -> torch.Tensor:
        found, loss = traced_parameters(self.objective, self.model, self.guide, args, kwargs)
        store = pyro.get_param_store()
        outside = [name for name in found if name not in store]
        if outside and not self.default:
            raise ValueError(
                f"{type(self.objective).__name__}: the parameters {outside[:3]} are not in Pyro's param "
                "store (pyro.settings module_local_params=True?); use CompiledSVI, which finds them, or "
                "graph='eager'"
            )
        self.outside, self.names = bool(outside), list(found)
        return cast(torch.Tensor, loss)

    def __call__(self, args: tuple, kwargs: dict) -> torch.Tensor:
        if self.outside:
            return cast(
                torch.Tensor, self.objective.differentiable_loss(self.model, self.guide, *args, **kwargs)
            )
        store = pyro.get_param_store()
        if not self.names or any(name not in store for name in self.names):
            return self._setup(args, kwargs)  # the first step (or a cleared store): eager
        check_not_empty(args, kwargs)
        params = [cast(Any, pyro.param(name)).unconstrained() for name in self.names]  # read for SVI
        return self.recorded(params, args, kwargs)  # a loss that is not finite: the caller names its input
