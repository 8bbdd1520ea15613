r"""``CompiledSVI``: SVI with the loss compiled once per input shape and one optimizer for all
parameters: the fast entry point."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, cast

import torch
from pyro.infer import SVI
from pyro.optim import PyroOptim

from .divergence import backward_checked
from .input_checks import check_compiled_svi, check_graph, check_not_empty
from .joint_optim import one_optimizer
from .recorded.graph import GraphLoss, traced_parameters
from .resume import Resumable

__all__ = ["CompiledSVI"]


class CompiledSVI(Resumable, SVI):
    r"""Stochastic variational inference with a compiled loss: ``pyro.infer.SVI``, faster.

    The same constructor and ``step``. The first step collects every parameter of the model and
    guide (they must all exist by then) into **one** optimizer built from the ``pyro.optim``
    object's constructor and arguments (fused updates where available; learning-rate schedulers
    are refused). The loss is recorded per call signature and replayed only under a guard read at
    every call, as for ``DropoutELBO`` (:mod:`pyro_dropout.infer.recorded`; :meth:`explain` says
    how each signature runs), and, by default, compiled by :func:`torch.compile` with its gradient (a
    first compile takes seconds, cached on disk by Inductor; a later signature, such as a short last
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
        check_compiled_svi(optim, loss, kwargs)
        super().__init__(model, guide, optim, loss, **kwargs)
        self.objective = loss  # SVI keeps only the bound methods of the loss
        self.graph = check_graph("CompiledSVI", graph)
        self._names: list[str] = []
        self._params: list[torch.Tensor] | None = None
        self._optimizer: torch.optim.Optimizer | None = None
        owner = f"CompiledSVI(graph={self.graph!r})"
        self._graph_loss = GraphLoss(loss, model, guide, self.graph, owner=owner)
        self._pending: dict[str, Any] | None = None  # a state to load once the parameters exist
        self.steps = 0  # steps taken by this object (the step number in a divergence error)

    def _setup(self, args: tuple, kwargs: dict) -> None:
        with torch.no_grad():
            found, _ = traced_parameters(self.objective, self.model, self.guide, args, kwargs)
        if not found:
            raise ValueError("CompiledSVI: the model and guide have no parameters to optimise")
        self._names, self._params = list(found), list(found.values())
        self._optimizer = one_optimizer(self.optim, self._names, self._params)

    def explain(self) -> str:
        """How each call signature's steps run, and why."""
        if self.graph == "eager":
            return "CompiledSVI(graph='eager'): every step eager"
        return self._graph_loss.recorded.explain()

    def step(self, *args: Any, **kwargs: Any) -> float:
        """One optimisation step; returns the loss estimate before the update (a float)."""
        check_not_empty(args, kwargs)
        self.setup(*args, **kwargs)
        assert self._optimizer is not None
        if self.graph != "eager":
            loss = self._graph_loss.recorded(cast(list, self._params), args, kwargs)
        else:
            loss = self.objective.differentiable_loss(self.model, self.guide, *args, **kwargs)
        self.steps += 1
        params = partial(zip, self._names, cast(list, self._params), strict=True)
        check_finite = getattr(self.objective, "check_finite", True)  # checked before the update
        value = backward_checked(loss, f"CompiledSVI step {self.steps}", args, kwargs, params, check_finite)
        self._optimizer.step()
        for param in cast(list, self._params):  # zero_grad(set_to_none=True), without its profiler wrapper
            param.grad = None
        return value

    @property
    def optimizer(self) -> torch.optim.Optimizer | None:
        """The single PyTorch optimizer (after the first step)."""
        return self._optimizer
