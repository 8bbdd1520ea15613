"""Checks of the arguments a model is called with: no NaN or inf, no empty batch."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any

import torch
from pyro.optim import PyroOptim
from pyro.optim.lr_scheduler import PyroLRScheduler

__all__ = [
    "GRAPHS",
    "check_compiled_svi",
    "check_finite_inputs",
    "check_graph",
    "check_not_empty",
    "checked_outside",
    "checking_inside",
    "has_non_finite",
    "named_inputs",
    "refuse_jit",
]

_CHECKED_OUTSIDE = contextvars.ContextVar("checked_outside", default=False)


@contextlib.contextmanager
def checked_outside() -> Iterator[None]:
    """Inside, the checks of values do nothing (:func:`check_finite_inputs`, and the observed
    data's check where :func:`checking_inside` is asked): for a loss being traced or compiled,
    whose caller checks the inputs of every call itself (a check inside would be frozen into
    the graph, or stop the recording at its host read)."""
    token = _CHECKED_OUTSIDE.set(True)
    try:
        yield
    finally:
        _CHECKED_OUTSIDE.reset(token)


def has_non_finite(value: Any) -> bool:
    """True when a floating tensor holds NaN or inf. One float64 reduction: NaN and inf
    survive a sum; only a sum of huge finite values can overflow, and is then checked exactly."""
    if not (isinstance(value, torch.Tensor) and value.is_floating_point()):
        return False
    if bool(torch.isfinite(value.sum(dtype=torch.float64))):
        return False
    return not bool(torch.isfinite(value).all())


def checking_inside() -> bool:
    """False inside :func:`checked_outside`: checks of values (inputs, observed data) are skipped."""
    return not _CHECKED_OUTSIDE.get()


def check_finite_inputs(args: tuple, kwargs: dict) -> None:
    """Raise ``ValueError`` naming the first model argument that holds NaN or inf."""
    if not checking_inside():
        return
    for what, value in named_inputs(args, kwargs):
        if has_non_finite(value):
            raise ValueError(f"{what} (shape {tuple(value.shape)}) contains NaN or inf")


def check_not_empty(args: tuple, kwargs: dict) -> None:
    """Raise ``ValueError`` naming the first model argument that is an empty tensor (a batch of
    no rows: Pyro's plates would fail with "size cannot be zero"), or a tensor on the meta device
    (shapes without values)."""
    for what, value in named_inputs(args, kwargs):
        if isinstance(value, torch.Tensor) and value.device.type == "meta":
            raise ValueError(
                f"{what} is on the meta device, which holds shapes but no values: move it to the CPU "
                "or a GPU (.to('cpu'))"
            )
        if isinstance(value, torch.Tensor) and value.dim() > 0 and value.numel() == 0:
            raise ValueError(
                f"{what} has shape {tuple(value.shape)}: an empty batch (no rows to fit or predict)"
            )


def named_inputs(args: tuple, kwargs: dict) -> list[tuple[str, Any]]:
    """``("model argument 0", x), ("model argument 'y'", y), ...``: for messages that name them."""
    return [(f"model argument {i}", v) for i, v in enumerate(args)] + [
        (f"model argument '{k}'", v) for k, v in kwargs.items()
    ]


GRAPHS = ("eager", "record", "compile")  # the losses' and CompiledSVI's graph= modes


def check_graph(owner: str, graph: Any) -> str:
    """``graph`` checked: ``"eager"``, ``"record"`` or ``"compile"``; a clear error otherwise."""
    if isinstance(graph, str) and graph in GRAPHS:
        return graph
    raise ValueError(f"{owner}: graph must be 'eager', 'record' or 'compile'; got {graph!r}")


def refuse_jit(kwargs: dict, owner: str) -> None:
    """A clear error for the option the graph replaced (``jit=``, ``jit_compile=``)."""
    for old in ("jit", "jit_compile"):
        if old in kwargs:
            raise TypeError(
                f"{owner}: {old}= was replaced by graph= ('record', 'compile' or 'eager'; TorchScript is "
                f"no longer used): {old}=False is graph='eager', {old}='compile' is graph='compile'"
            )


def check_compiled_svi(optim: Any, loss: Any, kwargs: dict) -> None:
    """``CompiledSVI``'s optimizer, loss and other arguments checked: a clear error for each kind
    it cannot take."""
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
    settings = optim.pt_optim_args if isinstance(optim.pt_optim_args, dict) else {}
    for key, value in settings.items():
        if isinstance(value, str | bytes):
            raise ValueError(f"CompiledSVI: the optimizer's {key} is {value!r}, a string; give a number")
    if not hasattr(loss, "differentiable_loss"):
        raise ValueError(
            f"CompiledSVI: the loss needs a differentiable_loss method; got {type(loss).__name__}"
        )
