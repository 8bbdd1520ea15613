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

from collections.abc import Callable
from typing import Any, cast

import pyro
import torch
from pyro import poutine

from ..input_checks import check_finite_inputs, check_not_empty, checked_outside
from .frozen import python_state
from .traced import TracedLoss

__all__ = ["JitLoss"]


class JitLoss:
    """``objective.differentiable_loss(model, guide, ...)``, traced once per input shape
    (``mode="compile"``: and compiled by :func:`torch.compile`)."""

    def __init__(self, objective: Any, model: Callable, guide: Callable, mode: str = "trace") -> None:
        self.objective, self.model, self.guide = objective, model, guide
        self.names: list[str] = []
        owner = f"{type(objective).__name__}(jit={'True' if mode == 'trace' else repr(mode)})"
        self.traced = TracedLoss(self._loss, mode, lambda: python_state(model, guide), owner)

    def _loss(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        with pyro.validation_enabled(False), checked_outside():  # __call__ checks the inputs
            return self.objective.differentiable_loss(self.model, self.guide, *args, **kwargs)

    def _setup(self, args: tuple, kwargs: dict) -> torch.Tensor:
        with poutine.trace(param_only=True) as capture:
            loss = self.objective.differentiable_loss(self.model, self.guide, *args, **kwargs)
        store = pyro.get_param_store()
        outside = [name for name in capture.trace.nodes if name not in store]
        if outside:
            raise ValueError(
                f"{type(self.objective).__name__}(jit=True): the parameters {outside[:3]} are not in "
                "Pyro's param store (pyro.settings module_local_params=True?); use CompiledSVI, which "
                "finds them, or jit=False"
            )
        self.names = list(capture.trace.nodes)
        return loss

    def __call__(self, args: tuple, kwargs: dict) -> torch.Tensor:
        store = pyro.get_param_store()
        if not self.names or any(name not in store for name in self.names):
            return self._setup(args, kwargs)  # the first step (or a cleared store): eager
        check_not_empty(args, kwargs)
        if self.objective.check_finite:
            check_finite_inputs(args, kwargs)
        params = [cast(Any, pyro.param(name)).unconstrained() for name in self.names]  # recorded for SVI
        return self.traced(params, args, kwargs)
