"""Checks of what a model observes at prediction time, before any draw is scored: every error
names the site and the fix, instead of a broadcast failure deep inside ``log_prob``."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyro.distributions as dist
import torch
from pyro.poutine.trace_struct import Trace

__all__ = ["check_array_inputs", "check_observations"]


def check_array_inputs(args: tuple, kwargs: dict) -> None:
    """A NumPy array or a plain list of numbers where the model takes tensors: one clear error
    naming the argument (the model would fail on it deep inside, or Pyro would refuse it)."""
    named = [(f"model argument {i}", v) for i, v in enumerate(args)]
    named += [(f"model argument '{k}'", v) for k, v in kwargs.items()]
    for what, value in named:
        numbers = isinstance(value, list | tuple) and value and all(isinstance(v, int | float) for v in value)
        if isinstance(value, np.ndarray) or numbers:
            raise TypeError(
                f"{what} is a {type(value).__name__}; give a tensor (torch.as_tensor(...)), as the model "
                "is trained on"
            )


def _base(fn: Any) -> Any:
    while hasattr(fn, "base_dist"):
        fn = fn.base_dist
    return fn


def _check_labels(name: str, value: torch.Tensor, fn: dist.Categorical) -> None:
    classes, batch, shape = int(fn._num_events), tuple(fn.batch_shape), tuple(value.shape)
    if len(shape) >= 2 and shape[:-1] == batch[-(len(shape) - 1) :] and shape[-1] in (1, classes):
        fix = "y.squeeze(-1)" if shape[-1] == 1 else "class indices, y.argmax(-1)"
        raise ValueError(
            f"at site '{name}': labels of shape {shape}; the likelihood takes one class index per point "
            f"({batch[-1]},): pass {fix}"
        )
    if value.is_complex() or (value.is_floating_point() and bool((value % 1 != 0).any())):
        found = value[value % 1 != 0].flatten()[0].item() if not value.is_complex() else value.dtype
        raise ValueError(f"at site '{name}': labels must be class indices (whole numbers), found {found}")
    if value.numel() and (int(value.min()) < 0 or int(value.max()) >= classes):
        raise ValueError(
            f"at site '{name}': labels must be classes 0..{classes - 1}, found {int(value.min())}.."
            f"{int(value.max())}"
        )


def check_observations(trace: Trace) -> None:
    """Each observed site of one draw's pass: a tensor; class indices in range for a categorical
    likelihood (not one-hot, not ``[N, 1]``); and a shape that pairs one value with each point."""
    for name, site in trace.nodes.items():
        if site["type"] != "sample" or not site["is_observed"]:
            continue
        value, fn = site["value"], site["fn"]
        if not isinstance(fn, torch.distributions.Distribution):  # a plate's subsample site
            continue
        if not isinstance(value, torch.Tensor):
            raise TypeError(
                f"at site '{name}': the observed value is a {type(value).__name__}; give a tensor"
            )
        if isinstance(_base(fn), dist.Categorical):
            _check_labels(name, value, _base(fn))
            continue
        expected = tuple(fn.batch_shape) + tuple(fn.event_shape)
        if (
            fn.event_dim == 0
            and value.dim() >= 2
            and value.shape[-1] == 1
            and value.shape[-2] > 1  # [N, 1] against N points would broadcast to [N, N]
            and expected[-1:] == (value.shape[-2],)
        ):
            raise ValueError(
                f"at site '{name}': y has shape {tuple(value.shape)}; the likelihood expects "
                f"({value.shape[-2]},), one value per point: pass y.squeeze(-1)"
            )
        try:
            torch.broadcast_shapes(tuple(value.shape), expected)
        except RuntimeError:
            raise ValueError(
                f"at site '{name}': the observed value has shape {tuple(value.shape)}, which does not fit "
                f"the likelihood's {expected}"
            ) from None
