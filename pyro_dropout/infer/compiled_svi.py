r"""``CompiledSVI``: SVI with a traced loss and one optimizer for all parameters."""

from __future__ import annotations

import copy
import inspect
import math
from collections.abc import Callable
from typing import Any, cast

import pyro
import torch
from pyro import poutine
from pyro.infer import SVI
from pyro.infer.util import is_validation_enabled
from pyro.optim import PyroOptim

from .divergence import check_gradients, check_loss
from .fast.compiled import check_jit
from .fast.frozen import StateWatch
from .fast.traced import TracedLoss, rng_state, set_rng_state_on
from .input_checks import check_finite_inputs, check_not_empty, checked_outside

__all__ = ["CompiledSVI"]


class CompiledSVI(SVI):
    r"""Stochastic variational inference with a compiled loss: ``pyro.infer.SVI``, faster.

    The same constructor and ``step`` as :class:`~pyro.infer.SVI`. On the first step it
    collects every parameter of the model and guide, builds **one** optimizer for all of
    them from the ``pyro.optim`` object's PyTorch constructor and arguments (``foreach``
    updates where available), and traces the loss with :func:`torch.jit.trace`, the
    parameters and tensor arguments as the trace's inputs. Random draws (dropout masks)
    stay random ops in the trace, so each step draws fresh masks. Later steps run the
    compiled graph: none of Pyro's per-site Python machinery runs, which on small networks
    is most of the time of an SVI step (see ``benchmarks/svi_step.py``).

    A new trace is made for every new combination of tensor shapes and non-tensor
    arguments (e.g. a smaller last minibatch). Requirements, as for any traced code: the
    model and guide have a static structure, and create all their parameters on the first
    step. ``jit_compile=False`` keeps the single optimizer but runs the loss eagerly;
    ``jit_compile="compile"`` also compiles the trace with :func:`torch.compile` (fused
    kernels for the loss and its gradient, after a first compile of seconds to a minute; a
    later input shape is traced until its 1,000th call; see
    :mod:`pyro_dropout.infer.fast.compiled`).

    PyTorch deprecates TorchScript, :func:`torch.jit.trace` included, from 2.11; in 2.13, the
    version tested here, it still works and warns on each trace (silenced here with the
    tracer's other warnings). Should a later PyTorch drop it, ``jit_compile=False`` keeps the
    rest.

    Usage:

        svi = CompiledSVI(model, guide, pyro.optim.Adam({"lr": 1e-3}), DropoutELBO())
        for x, y in batches:
            svi.step(x, y)

    :param loss: a loss with ``differentiable_loss`` (``DropoutELBO``, ``BBAlpha`` or any
        Pyro ``ELBO``).
    """

    def __init__(
        self,
        model: Callable,
        guide: Callable,
        optim: PyroOptim,
        loss: Any,
        *,
        jit_compile: bool | str = True,
        **kwargs: Any,
    ) -> None:
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
        mode = check_jit("CompiledSVI", jit_compile)
        self.jit_compile = bool(mode)
        self._names: list[str] = []
        self._params: list[torch.Tensor] | None = None
        self._optimizer: torch.optim.Optimizer | None = None
        # the trace's key: the modules' Python values it freezes
        self._traced = TracedLoss(self._loss, mode or "trace", StateWatch(model, guide), "CompiledSVI")
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
        constructor = self.optim.pt_optim_constructor
        settings = self.optim.pt_optim_args
        accepts = inspect.signature(constructor).parameters
        if callable(settings):
            groups = [{"params": [p], **settings(n)} for n, p in zip(names, self._params, strict=True)]
        else:
            groups = [{"params": self._params, **settings}]
        extra = _update_kernel(accepts, groups, self._params)
        try:
            self._optimizer = constructor(groups, **extra)
        except (RuntimeError, ValueError):
            if "fused" not in extra:
                raise
            self._optimizer = constructor(groups)  # a fused update this optimizer or device lacks

    def _loss(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        with pyro.validation_enabled(False), checked_outside():  # step checks the inputs
            return self.objective.differentiable_loss(self.model, self.guide, *args, **kwargs)

    def retrace(self) -> None:
        """Trace the loss again at the next step: after changing a Python value it reads that
        is not an attribute of the model's or guide's modules (those are checked at every
        step), such as a global or a closure's variable."""
        self._traced.retrace()

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
        if self.jit_compile:
            loss = self._traced(cast(list, self._params), args, kwargs)
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

    # --- saving and resuming ----------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The state of training after the steps so far: every parameter (unconstrained), the
        optimizer's state (e.g. Adam's moments and step counts), and the random-number state
        of Python, NumPy and PyTorch (the parameters' GPU too), which draws the masks.

        :meth:`load_state_dict` on a ``CompiledSVI`` of the same model and guide, in a fresh
        process, continues exactly where this one stands: the same steps on the same batches
        give the same parameters as if training had never stopped.
        """
        if self._optimizer is None or self._params is None:
            raise RuntimeError("CompiledSVI.state_dict: no step has run yet, so there is no state")
        return {
            "params": {n: p.detach().clone() for n, p in zip(self._names, self._params, strict=True)},
            "optimizer": copy.deepcopy(self._optimizer.state_dict()),
            "rng": rng_state(self._params[0].device),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`state_dict`. Before the first step (when the parameters do not
        exist yet) the state is loaded by that step or by :meth:`setup`, right after the
        parameters are created."""
        missing = {"params", "optimizer", "rng"} - set(state)
        if missing:
            raise ValueError(f"CompiledSVI.load_state_dict: the state lacks {sorted(missing)}")
        if self._optimizer is None:
            self._pending = state
        else:
            self._load(state)

    def _load(self, state: dict[str, Any]) -> None:
        assert self._optimizer is not None and self._params is not None
        stored = state["params"]
        if set(stored) != set(self._names):
            raise ValueError(
                "CompiledSVI.load_state_dict: the state's parameters "
                f"{sorted(set(stored) ^ set(self._names))} are not all the model and guide's"
            )
        with torch.no_grad():
            for name, param in zip(self._names, self._params, strict=True):
                value = stored[name]
                if value.shape != param.shape:
                    raise ValueError(
                        f"CompiledSVI.load_state_dict: {name!r} has shape {tuple(value.shape)} in the "
                        f"state but {tuple(param.shape)} here"
                    )
                param.copy_(value)
        self._optimizer.load_state_dict(state["optimizer"])
        set_rng_state_on(state["rng"], self._params[0].device)

    @property
    def optimizer(self) -> torch.optim.Optimizer | None:
        """The single PyTorch optimizer (after the first step)."""
        return self._optimizer


def _update_kernel(accepts: Any, groups: list[dict[str, Any]], params: list[torch.Tensor]) -> dict[str, bool]:
    """The optimizer's update implementation, where the user's settings leave it open: fused
    (one kernel for all parameters, CPU or CUDA floats) where the constructor takes it, else
    foreach on large tensors (3x on a 784-1024-1024 net, 1.5x slower on a 13-50-1 net on CPU).
    Fused measured 10% faster than the for-loop on the 13-50-1 net, as fast on the wide one."""
    if any("foreach" in g or "fused" in g for g in groups):
        return {}
    floats = all(p.is_floating_point() and p.device.type in ("cpu", "cuda") for p in params)
    if "fused" in accepts and floats:
        return {"fused": True}
    large = sum(p.numel() for p in params) > 100_000 or params[0].device.type == "cuda"
    return {"foreach": large} if "foreach" in accepts else {}
