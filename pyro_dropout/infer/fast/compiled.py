r"""A loss compiled by :func:`torch.compile`: the fast path's ``jit="compile"``.

Pyro's effect handlers are Python that TorchDynamo cannot follow without breaking the graph
at every site, so the loss is first recorded as a graph of ATen operations
(:func:`torch.fx.experimental.proxy_tensor.make_fx` on the real tensors: the Python runs
once, like :func:`torch.jit.trace`, and its Python values are frozen into the graph). The
graph holds the loss *and* its gradient with respect to the parameters (the backward pass
recorded as ATen operations too), and is compiled by :func:`torch.compile` as one inference
graph: Inductor fuses the forward and backward kernels, and a step runs no autograd graph of
its own. The loss it returns hands that gradient to ``backward()``; it cannot be
differentiated twice. Random draws stay random operations, so each call
draws fresh masks; they come from the same generator calls as in eager code (Inductor's
``fallback_random``), so a seed gives the same masks as the eager loss.

Compiling takes seconds to a minute the first time in a process (Inductor writes its kernels
to an on-disk cache, which later processes reuse). Where compiling is not possible (no C++
compiler, an operation Inductor lacks, Python that reads a tensor's value), :func:`compile_loss`
returns the reason and the caller falls back to the traced loss.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any, cast

import torch

__all__ = ["check_jit", "compile_loss"]


def check_jit(owner: str, jit: Any) -> str:
    """``jit`` as ``""`` (off), ``"trace"``, ``"compile"`` or ``"auto"``; a clear error for
    anything else."""
    if jit is False or jit is None:
        return ""
    if jit == "auto":
        return "auto"
    if jit is True or jit == "trace":
        return "trace"
    if jit == "compile":
        return "compile"
    raise ValueError(f"{owner}: jit must be 'auto', False, True (or 'trace') or 'compile'; got {jit!r}")


def compile_loss(
    fn: Callable[..., torch.Tensor], inputs: tuple[torch.Tensor, ...], num_params: int = 0
) -> tuple[Callable[..., torch.Tensor] | None, str]:
    """``fn`` recorded on ``inputs`` and compiled, with a first call already made (compiling
    happens there); ``(None, reason)`` where either step fails. Run it under a forked random
    state: recording and the first call draw masks.

    The first ``num_params`` inputs are the parameters: the loss and its gradient with respect
    to them are recorded as one graph and compiled together, and the result is a loss whose
    ``backward()`` hands out the gradient computed with it (no autograd graph is kept)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    wanted = tuple(t.requires_grad for t in inputs[:num_params])
    differentiable = any(wanted)
    joint = _with_gradient(fn, wanted) if differentiable else fn
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            graph = make_fx(joint, tracing_mode="real")(*inputs)
    except Exception as error:  # any Python the recorder cannot follow
        return None, f"recording the loss failed ({type(error).__name__}: {_first_line(error)})"
    # fallback_random: random draws by PyTorch's own generator calls, not Inductor's, so that a
    # seed draws what the eager loss draws (and a saved random state resumes training exactly)
    compiled = torch.compile(graph, dynamic=False, fullgraph=True, options={"fallback_random": True})

    def loss(*tensors: torch.Tensor) -> torch.Tensor:
        return cast(torch.Tensor, _LossWithGradient.apply(compiled, wanted, *tensors))

    run = loss if differentiable else compiled
    try:  # the first call compiles, in the grad mode of the calls after it (a change recompiles)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            run(*inputs)
    except Exception as error:  # no compiler, an operation Inductor cannot lower, ...
        return None, f"torch.compile failed ({type(error).__name__}: {_first_line(error)})"
    return run, ""


def _with_gradient(fn: Callable[..., torch.Tensor], wanted: tuple[bool, ...]) -> Callable[..., tuple]:
    """``fn``'s value and its gradient with respect to the first inputs whose ``wanted`` flag is
    set (zeros for one the loss does not use), as one function to record."""

    def value_and_gradient(*inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        params = [t for t, flag in zip(inputs, wanted, strict=False) if flag]
        value = fn(*inputs)
        grads = torch.autograd.grad(value, params, allow_unused=True)
        return value.detach(), *(
            torch.zeros_like(p) if g is None else g for p, g in zip(params, grads, strict=True)
        )

    return value_and_gradient


class _LossWithGradient(torch.autograd.Function):
    """The compiled loss's value, whose backward hands out the gradient computed with it."""

    @staticmethod
    def forward(
        ctx: Any, compiled: Callable, wanted: tuple[bool, ...], *inputs: torch.Tensor
    ) -> torch.Tensor:
        value, *grads = compiled(*inputs)
        ctx.grads, ctx.wanted, ctx.num_inputs = grads, wanted, len(inputs)
        return value

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, upstream: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        grads = iter(ctx.grads)
        out = [upstream * next(grads) if flag else None for flag in ctx.wanted]
        return None, None, *out, *([None] * (ctx.num_inputs - len(ctx.wanted)))


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0][:200] if text else "no message"
