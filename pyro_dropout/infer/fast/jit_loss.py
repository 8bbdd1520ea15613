r"""The losses' fast path: ``DropoutELBO(jit=True)`` and ``BBAlpha(alpha, jit=True)`` in plain
``pyro.infer.SVI``.

The first step runs eagerly and learns the parameters' names. Later steps run the loss traced
once per input shape (:class:`~pyro_dropout.infer.fast.traced.TracedLoss`, the parameters as the
trace's inputs; ``jit="compile"`` compiles the trace with :func:`torch.compile`, see
:mod:`pyro_dropout.infer.fast.compiled`), and record each parameter with ``pyro.param`` so that
``SVI`` finds and steps them as usual. Random draws (masks) stay random ops in the trace: each
step draws anew.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable
from typing import Any, cast

import pyro
import torch
from pyro import poutine

from ..input_checks import check_finite_inputs, check_not_empty, checked_outside
from .frozen import StateWatch
from .traced import TracedLoss

__all__ = ["JitLoss"]


class JitLoss:
    """``objective.differentiable_loss(model, guide, ...)``, traced once per input shape
    (``mode="compile"``: and compiled by :func:`torch.compile`; ``mode="auto"``: after each
    shape's first eager calls, and eager without a word where tracing cannot be exact).
    ``owned``: the objective keeps this loss (``objective.jit_losses``), so it is held weakly."""

    def __init__(
        self, objective: Any, model: Callable, guide: Callable, mode: str = "trace", owned: bool = False
    ) -> None:
        # held weakly where the objective keeps this loss (no cycle to keep the model and guide alive)
        self._objective = weakref.ref(objective) if owned else lambda: objective
        self.model, self.guide = model, guide
        self.names: list[str] = []
        self.auto = mode == "auto"
        self.outside = False  # mode="auto" with parameters outside the param store: eager
        owner = f"{type(objective).__name__}(jit={'True' if mode == 'trace' else repr(mode)})"
        # the trace's key: the modules' Python values it freezes
        self.traced = TracedLoss(self._loss, mode, StateWatch(model, guide), owner)

    @property
    def objective(self) -> Any:
        return self._objective()

    def _loss(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        with pyro.validation_enabled(False), checked_outside():  # __call__ checks the inputs
            return self.objective.differentiable_loss(self.model, self.guide, *args, **kwargs)

    def _setup(self, args: tuple, kwargs: dict) -> torch.Tensor:
        with poutine.trace(param_only=True) as capture:
            loss = self.objective.differentiable_loss(self.model, self.guide, *args, **kwargs)
        store = pyro.get_param_store()
        outside = [name for name in capture.trace.nodes if name not in store]
        self.outside = self.auto and bool(outside)
        if outside and not self.auto:
            raise ValueError(
                f"{type(self.objective).__name__}(jit=True): the parameters {outside[:3]} are not in "
                "Pyro's param store (pyro.settings module_local_params=True?); use CompiledSVI, which "
                "finds them, or jit=False"
            )
        self.names = list(capture.trace.nodes)
        return loss

    def __call__(self, args: tuple, kwargs: dict) -> torch.Tensor:
        if self.outside:
            loss = self.objective.differentiable_loss(self.model, self.guide, *args, **kwargs)
            return cast(torch.Tensor, loss)
        store = pyro.get_param_store()
        if not self.names or any(name not in store for name in self.names):
            return self._setup(args, kwargs)  # the first step (or a cleared store): eager
        check_not_empty(args, kwargs)
        params = [cast(Any, pyro.param(name)).unconstrained() for name in self.names]  # recorded for SVI
        loss = self.traced(params, args, kwargs)
        if self.objective.check_finite and not math.isfinite(float(loss.detach())):
            check_finite_inputs(args, kwargs)  # an input holding NaN or inf is named as the cause; the
        return loss  # check costs nothing while the loss is finite
