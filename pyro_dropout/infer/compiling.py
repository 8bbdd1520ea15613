r"""A loss compiled by :func:`torch.compile`: the fast path's ``jit="compile"``.

Pyro's effect handlers are Python that TorchDynamo cannot follow without breaking the graph
at every site, so the loss is first recorded as a graph of ATen operations
(:func:`torch.fx.experimental.proxy_tensor.make_fx` on the real tensors: the Python runs
once, like :func:`torch.jit.trace`, and its Python values are frozen into the graph), and that
graph is compiled by :func:`torch.compile` (Inductor: fused CPU or GPU kernels for the loss and,
through AOTAutograd, for its gradient). Random draws stay random operations, so each call
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
from typing import Any

import torch

__all__ = ["check_jit", "compile_loss"]


def check_jit(owner: str, jit: Any) -> str:
    """``jit`` as ``""`` (off), ``"trace"`` or ``"compile"``; a clear error for anything else."""
    if jit is False or jit is None:
        return ""
    if jit is True or jit == "trace":
        return "trace"
    if jit == "compile":
        return "compile"
    raise ValueError(f"{owner}: jit must be False, True (or 'trace') or 'compile'; got {jit!r}")


def compile_loss(
    fn: Callable[..., torch.Tensor], inputs: tuple[torch.Tensor, ...]
) -> tuple[Callable[..., torch.Tensor] | None, str]:
    """``fn`` recorded on ``inputs`` and compiled, with a first call already made (compiling
    happens there); ``(None, reason)`` where either step fails. Run it under a forked random
    state: recording and the first call draw masks."""
    from torch.fx.experimental.proxy_tensor import make_fx

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            graph = make_fx(fn, tracing_mode="real")(*inputs)
    except Exception as error:  # any Python the recorder cannot follow
        return None, f"recording the loss failed ({type(error).__name__}: {_first_line(error)})"
    # fallback_random: random draws by PyTorch's own generator calls, not Inductor's, so that a
    # seed draws what the eager loss draws (and a saved random state resumes training exactly)
    compiled = torch.compile(graph, dynamic=False, fullgraph=True, options={"fallback_random": True})
    grads = [t.grad for t in inputs]  # the first call's backward compiles the gradient; undone after
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            value = compiled(*inputs)
            if value.requires_grad:
                value.backward()
    except Exception as error:  # no compiler, an operation Inductor cannot lower, ...
        return None, f"torch.compile failed ({type(error).__name__}: {_first_line(error)})"
    finally:
        for t, grad in zip(inputs, grads, strict=True):
            t.grad = grad
    return compiled, ""


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0][:200] if text else "no message"
