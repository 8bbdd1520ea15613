r"""The losses' graph in plain ``pyro.infer.SVI`` (``DropoutELBO(graph=...)``, ``BBAlpha(..., graph=...)``):
the first step runs eagerly and learns the parameters' names; later steps run the recorded graph on
the parameters ``pyro.param`` reads, so that ``SVI`` steps them as usual.
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
from .graph import WARM_UP, RecordedLoss
from .state import StateWatch

__all__ = ["GraphLoss"]


class GraphLoss:
    """``objective.differentiable_loss(model, guide, ...)`` recorded once per key (``mode``:
    ``"record"`` or ``"compile"``; ``default``: the loss was not asked for a graph, so it warms up
    and stays quiet). ``owned``: the objective keeps this loss, so it is held weakly."""

    def __init__(
        self, objective: Any, model: Callable, guide: Callable, mode: str, default: bool, owned: bool = False
    ) -> None:
        self._objective = weakref.ref(objective) if owned else lambda: objective
        self.model, self.guide, self.default = model, guide, default
        self.names: list[str] = []
        self.outside = False  # by default, with parameters outside the param store: eager
        owner = type(objective).__name__ + ("" if default else f"(graph={mode!r})")
        warm_up = WARM_UP if default else 0
        self.recorded = RecordedLoss(  # the user's line: SVI.step, loss_and_grads, this __call__
            self._loss,
            mode,
            StateWatch(model, guide),
            owner,
            warm_up,
            quiet=default,
            depth=3,
        )

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
        if outside and not self.default:
            raise ValueError(
                f"{type(self.objective).__name__}: the parameters {outside[:3]} are not in Pyro's param "
                "store (pyro.settings module_local_params=True?); use CompiledSVI, which finds them, or "
                "graph='eager'"
            )
        self.outside, self.names = bool(outside), list(capture.trace.nodes)
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
        loss = self.recorded(params, args, kwargs)
        if self.objective.check_finite and not math.isfinite(float(loss.detach())):
            check_finite_inputs(args, kwargs)  # an input holding NaN or inf is named as the cause
        return loss
