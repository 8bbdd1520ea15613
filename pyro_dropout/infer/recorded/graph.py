r"""A loss recorded per call signature and replayed only under a guard read on every call
(docs/design.md, "How a call runs").

:class:`RecordedLoss` keeps one :class:`Route` per call signature (the arguments' tree, shapes,
dtypes, devices and other values, and which parameters require a gradient). A signature runs
eagerly until its :data:`RECORD_AT`\ th call; that call is the step itself, run eagerly while
:func:`~pyro_dropout.guards.watching` notes what the user's code read; from its reads the route's
:class:`~pyro_dropout.guards.Guard` is made, the loss is recorded (:mod:`.record`) and admitted (from
the eager loss's random state it must give its value, gradient and draws), and the passes that only
record leave no trace (random state, buffers: :func:`~pyro_dropout.guards.restoring`). Every later
call reads the guard: a graph recorded with this very fingerprint replays the call, any other state
records anew (or, changing at most calls, runs eagerly). What no guard can cover runs eagerly, the
reason kept for :meth:`RecordedLoss.explain`. Routes and graphs are bounded, least recently used
first out, with one warning.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any, cast

import pyro
import torch
from pyro import poutine

from ...guards import object_roots, pyro_handlers, signature, tensors_of
from ..input_checks import check_not_empty, checked_outside
from .routes import Routes, graph_for, record_call

__all__ = ["COMPILE_AFTER", "RECORD_AT", "GraphLoss", "RecordedLoss", "traced_parameters"]

RECORD_AT = 8  # a signature's call at which it is recorded (its calls before run eagerly)
COMPILE_AFTER = 1000  # graph="compile": the calls after which a signature other than the first is compiled


class RecordedLoss:
    """``loss(*args, **kwargs)`` recorded per signature and replayed under its guard (see the
    module's docs); ``roots``: the model's, guide's and objective's roots (read by every guard);
    ``mode``: ``"record"`` or ``"compile"``; ``owner``: who warns."""

    def __init__(self, loss: Callable, mode: str, roots: Callable[[], list], owner: str) -> None:
        self._loss = weakref.WeakMethod(loss) if hasattr(loss, "__self__") else (lambda: loss)
        self.mode, self.roots, self.owner = mode, roots, owner
        self.routes = Routes(owner)
        self.handlers = ""  # the last Pyro handler that made a call run eagerly

    @property
    def loss(self) -> Callable:
        return cast(Callable, self._loss())  # its owner, a GraphLoss, holds this object

    def explain(self) -> str:
        """How each call signature runs, and why."""
        first = 1 if self.mode == "compile" else RECORD_AT
        pending = f"recorded at its call {first}"
        routes = [f"  {r.describe(pending)}" for r in self.routes.by_key.values()] or ["  no call yet"]
        if self.handlers:
            routes.append(f"  calls inside Pyro's {self.handlers} ran eagerly (a graph would bypass it)")
        return "\n".join([f"{self.owner}:", *routes])

    def retrace(self) -> None:
        """Drop every graph (never needed for exactness: each call reads its guard)."""
        self.routes.by_key.clear()

    def __call__(self, params: list[torch.Tensor], args: tuple, kwargs: dict) -> torch.Tensor:
        handlers = pyro_handlers()
        if handlers:
            self.handlers = handlers
            return self.loss(*args, **kwargs)
        key = (tuple(p.requires_grad for p in params), signature(args, kwargs))
        route = self.routes.get(key, args, kwargs)
        first = 1 if self.mode == "compile" else RECORD_AT  # asked to compile: compiled at once
        if route.eager or (route.guard is None and route.calls < first):
            return self.loss(*args, **kwargs)
        compiling = self.mode == "compile" and (
            route.compiled or not self.routes.compiled_any() or route.calls > COMPILE_AFTER
        )
        graph = None if route.guard is None else graph_for(route)
        if graph is not None and (route.compiled or not compiling):
            return cast(torch.Tensor, graph(*params, *tensors_of(args, kwargs)))
        if route.eager:
            return self.loss(*args, **kwargs)
        roots = self.roots() if route.guard is None else route.guard.roots
        value = record_call(route, self.routes, self.loss, tuple(params), args, kwargs, roots, compiling)
        return cast(torch.Tensor, value)


def traced_parameters(objective: Any, model: Callable, guide: Callable, args: tuple, kwargs: dict) -> tuple:
    """The parameters ``objective.differentiable_loss(model, guide, ...)`` reads, by name and
    unconstrained (from its trace: with ``pyro.settings`` ``module_local_params=True`` they are not
    in the param store), and its value."""
    with poutine.trace(param_only=True) as capture:
        value = objective.differentiable_loss(model, guide, *args, **kwargs)
    nodes = capture.trace.nodes
    return {name: cast(Any, nodes[name]["value"]).unconstrained() for name in nodes}, value


class GraphLoss:
    """``objective.differentiable_loss(model, guide, ...)`` recorded per signature (``mode``:
    ``"record"`` or ``"compile"``), its parameters read from Pyro's param store by name at every
    call, as plain ``SVI`` needs (its first call runs eagerly and learns their names). ``owned``:
    the objective keeps this loss, so it is held weakly; ``owner``: who warns."""

    def __init__(
        self,
        objective: Any,
        model: Callable,
        guide: Callable,
        mode: str,
        owned: bool = False,
        owner: str = "",
    ) -> None:
        self._objective = weakref.ref(objective) if owned else lambda: objective
        self.model, self.guide = model, guide
        self.names: list[str] = []
        self.outside = ""  # why the loss runs eagerly: parameters outside Pyro's param store
        owner = owner or f"{type(objective).__name__}(graph={mode!r})"
        self.recorded = RecordedLoss(self._loss, mode, self._roots, owner)

    @property
    def objective(self) -> Any:
        return self._objective()

    def _roots(self) -> list:
        return object_roots(self.model, self.guide, self.objective)

    def _loss(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        with pyro.validation_enabled(False), checked_outside():  # the step checks the inputs
            return cast(
                torch.Tensor, self.objective.differentiable_loss(self.model, self.guide, *args, **kwargs)
            )

    def explain(self) -> str:
        """How this loss's calls run, and why."""
        if self.outside:
            return f"{self.recorded.owner}: eager ({self.outside})"
        return self.recorded.explain()

    def _setup(self, args: tuple, kwargs: dict) -> torch.Tensor:
        found, loss = traced_parameters(self.objective, self.model, self.guide, args, kwargs)
        store = pyro.get_param_store()
        outside = [name for name in found if name not in store]
        if outside:
            self.outside = f"the parameters {outside[:3]} are not in Pyro's param store (module_local_params)"
        self.names = list(found)
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
