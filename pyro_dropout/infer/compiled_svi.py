r"""``CompiledSVI``: SVI with the loss compiled once per input shape and one optimizer for all
parameters: the fast entry point."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, cast

import pyro
import torch
from pyro import poutine
from pyro.infer import SVI
from pyro.infer.util import is_validation_enabled
from pyro.optim import PyroOptim
from pyro.optim.lr_scheduler import PyroLRScheduler

from .divergence import check_gradients, check_loss
from .input_checks import check_finite_inputs, check_graph, check_not_empty, checked_outside, refuse_jit
from .joint_optim import one_optimizer
from .recorded.graph import RecordedLoss
from .recorded.state import StateWatch
from .resume import Resumable

__all__ = ["CompiledSVI"]


class CompiledSVI(Resumable, SVI):
    r"""Stochastic variational inference with a compiled loss: ``pyro.infer.SVI``, faster.

    The same constructor and ``step``. The first step collects every parameter of the model and
    guide (they must all exist by then) into **one** optimizer built from the ``pyro.optim``
    object's constructor and arguments (fused updates where available; learning-rate schedulers
    are refused). The loss is recorded once per input shape (:mod:`pyro_dropout.infer.recorded`,
    keys, value reads and spot checks as for ``DropoutELBO``; :meth:`retrace` after changing a
    global it reads) and, by default, compiled by :func:`torch.compile` with its gradient (a first
    compile takes seconds, cached on disk by Inductor; a later input shape, such as a short last
    batch, runs its recorded graph until its 1,000th call). Each step draws fresh masks.
    :meth:`state_dict` and :meth:`load_state_dict` resume a fit exactly.

    Usage:

        svi = CompiledSVI(model, guide, pyro.optim.Adam({"lr": 1e-3}), DropoutELBO())
        for x, y in batches:
            svi.step(x, y)

    :param loss: a loss with ``differentiable_loss`` (``DropoutELBO``, ``BBAlpha`` or any
        Pyro ``ELBO``).
    :param graph: ``"compile"`` (default), ``"record"`` (the recorded graph, not compiled) or
        ``"eager"``.
    """

    def __init__(
        self,
        model: Callable,
        guide: Callable,
        optim: PyroOptim,
        loss: Any,
        *,
        graph: str = "compile",
        **kwargs: Any,
    ) -> None:
        refuse_jit(kwargs, "CompiledSVI")
        if isinstance(optim, PyroLRScheduler):
            raise ValueError(
                f"CompiledSVI does not step a learning-rate scheduler ({type(optim).__name__} of "
                f"{optim.pt_scheduler_constructor.__name__}): use pyro.infer.SVI, or a fixed lr"
            )
        if not isinstance(optim, PyroOptim) or not hasattr(optim, "pt_optim_constructor"):
            raise ValueError(
                "CompiledSVI needs a pyro.optim optimizer such as pyro.optim.Adam({...}); "
                f"got {type(optim).__name__} (learning-rate schedulers: use pyro.infer.SVI)"
            )
        if not hasattr(loss, "differentiable_loss"):
            raise ValueError(
                f"CompiledSVI: the loss needs a differentiable_loss method; got {type(loss).__name__}"
            )
        super().__init__(model, guide, optim, loss, **kwargs)
        self.objective = loss  # SVI keeps only the bound methods of the loss
        self.graph = check_graph("CompiledSVI", graph)
        self._names: list[str] = []
        self._params: list[torch.Tensor] | None = None
        self._optimizer: torch.optim.Optimizer | None = None
        # the graph's key: the modules' Python values it freezes
        state = StateWatch(model, guide)
        self._recorded = RecordedLoss(self._loss, self.graph, state, f"CompiledSVI(graph={self.graph!r})")
        self._pending: dict[str, Any] | None = None  # a state to load once the parameters exist
        self.steps = 0  # steps taken by this object (the step number in a divergence error)

    # --- set-up ----------------------------------------------------------------------
    def _setup(self, args: tuple, kwargs: dict) -> None:
        with poutine.trace(param_only=True) as capture, torch.no_grad():
            self.objective.differentiable_loss(self.model, self.guide, *args, **kwargs)
        names = list(capture.trace.nodes)
        self._names = names
        if not names:
            raise ValueError("CompiledSVI: the model and guide have no parameters to optimise")
        # the traced values, not the param store: with pyro.settings module_local_params=True
        # a PyroModule's parameters are not in the store
        self._params = [cast(Any, capture.trace.nodes[name]["value"]).unconstrained() for name in names]
        self._optimizer = one_optimizer(self.optim, names, self._params)

    def _loss(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        with pyro.validation_enabled(False), checked_outside():  # step checks the inputs
            return self.objective.differentiable_loss(self.model, self.guide, *args, **kwargs)

    def retrace(self) -> None:
        """Record the loss again at the next step: after changing a Python value it reads that is
        not an attribute of the model's or guide's modules (those are part of its key), such as a
        global or a closure's variable."""
        self._recorded.retrace()

    def setup(self, *args: Any, **kwargs: Any) -> None:
        """Create the parameters and the optimizer, as the first :meth:`step` does, without a
        step (arguments as for ``step``; only their shapes matter); then load a state given
        to :meth:`load_state_dict` before. Later calls do nothing."""
        if self._optimizer is None:
            self._setup(args, kwargs)
        if self._pending is not None:
            state, self._pending = self._pending, None
            self._load(state)

    # --- the step --------------------------------------------------------------------
    def step(self, *args: Any, **kwargs: Any) -> float:
        """One optimisation step; returns the loss estimate before the update (a float)."""
        check_not_empty(args, kwargs)
        self.setup(*args, **kwargs)
        assert self._optimizer is not None
        if self.graph != "eager":
            loss = self._recorded(cast(list, self._params), args, kwargs)
        else:
            loss = self.objective.differentiable_loss(self.model, self.guide, *args, **kwargs)
        value = float(loss.detach())
        self.steps += 1
        if getattr(self.objective, "check_finite", True):  # before the update: the parameters stay finite
            if not math.isfinite(value):  # an input holding NaN or inf is named as the cause; its
                check_finite_inputs(args, kwargs)  # check costs nothing while the loss is finite
            params = zip(self._names, cast(list, self._params), strict=True)
            check_loss(value, f"CompiledSVI step {self.steps}", args, kwargs, params)
        loss.backward()
        if getattr(self.objective, "check_finite", True) and is_validation_enabled():
            params = zip(self._names, cast(list, self._params), strict=True)
            check_gradients(f"CompiledSVI step {self.steps}", params, args, kwargs)
        self._optimizer.step()
        for param in cast(list, self._params):  # zero_grad(set_to_none=True), without its profiler wrapper
            param.grad = None
        return value

    @property
    def optimizer(self) -> torch.optim.Optimizer | None:
        """The single PyTorch optimizer (after the first step)."""
        return self._optimizer
