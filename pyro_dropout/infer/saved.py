"""Loading saved parameters and optimizer states without running the file's code.

``pyro.get_param_store().load(f)`` and ``pyro.optim``'s ``load(f)`` unpickle with
``torch.load(..., weights_only=False)``: a crafted file runs whatever it says. These read the same
files with ``weights_only=True``, which admits tensors, plain data and, here, the constraint
classes of ``torch.distributions.constraints`` and ``pyro.distributions.constraints`` (what a
param store's state holds beside its tensors). A file holding anything else is refused with an
error naming it.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any, cast

import pyro
import pyro.distributions.constraints as pyro_constraints
import torch
from torch.distributions import constraints

__all__ = ["load_param_store", "safe_load"]

_CONSTRAINTS: list[Any] = sorted(
    {
        value
        for module in (constraints, pyro_constraints)
        for value in vars(module).values()
        if isinstance(value, type) and issubclass(value, constraints.Constraint)
    },
    key=lambda c: (c.__module__, c.__qualname__),
)


def safe_load(path: str | Path, map_location: Any = None) -> Any:
    """``torch.load(path, weights_only=True)`` that also admits constraint objects; a file that
    holds other objects (code, a class of its own) is an error naming the file."""
    try:
        with torch.serialization.safe_globals(_CONSTRAINTS):
            return torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ValueError(
            f"{path}: holds objects other than tensors, plain data and constraints, so it is not "
            f"loaded (weights_only=True; {first})"
        ) from None


def load_param_store(path: str | Path, map_location: Any = None) -> None:
    """``pyro.get_param_store().load(path)`` without unpickling code: the state a
    ``pyro.get_param_store().save(path)`` wrote, read with :func:`safe_load` and set."""
    state = safe_load(path, map_location)
    if not isinstance(state, dict) or not {"params", "constraints"} <= state.keys():
        raise ValueError(f"{path}: not a param store's state (no 'params' and 'constraints')")
    pyro.get_param_store().set_state(cast(Any, state))
