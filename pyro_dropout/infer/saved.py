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

__all__ = ["check_optimizer_state", "check_param_store_state", "load_param_store", "safe_load"]

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
        raise ValueError(
            f"{path}: holds objects other than tensors, plain data and constraints, so it is not "
            f"loaded (weights_only=True; {_first_line(e)})"
        ) from None
    except (RuntimeError, EOFError, ValueError, IndexError, KeyError) as e:  # cut short, or not torch's
        raise ValueError(
            f"{path}: not a whole file saved by torch.save (truncated, or another format: {_first_line(e)})"
        ) from None


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0][:160]}" if text else type(error).__name__


def load_param_store(path: str | Path, map_location: Any = None) -> None:
    """``pyro.get_param_store().load(path)`` without unpickling code: the state a
    ``pyro.get_param_store().save(path)`` wrote, read with :func:`safe_load` and set."""
    state = safe_load(path, map_location)
    check_param_store_state(state, str(path))
    pyro.get_param_store().set_state(cast(Any, state))


def check_param_store_state(state: Any, where: str) -> None:
    """A param store's state checked as data from outside: ``params`` a dict of floating tensors by
    name, ``constraints`` the same names' constraints, each of which can be applied to its value."""
    if not isinstance(state, dict) or not {"params", "constraints"} <= state.keys():
        raise ValueError(f"{where}: not a param store's state (no 'params' and 'constraints')")
    params, bounds = state["params"], state["constraints"]
    if not isinstance(params, dict) or not isinstance(bounds, dict):
        raise ValueError(f"{where}: 'params' and 'constraints' must be dicts by name")
    for name, value in params.items():
        if not isinstance(name, str) or not isinstance(value, torch.Tensor) or not value.is_floating_point():
            raise ValueError(f"{where}: parameter {name!r} is not a floating tensor ({type(value).__name__})")
        bound = bounds.get(name)
        if not isinstance(bound, constraints.Constraint):
            raise ValueError(f"{where}: parameter {name!r} has no constraint (got {type(bound).__name__})")
        try:
            torch.distributions.biject_to(bound)(value)
        except Exception as e:  # a constraint object without its values, say
            raise ValueError(
                f"{where}: parameter {name!r}'s constraint cannot be applied ({_first_line(e)})"
            ) from None
    extra = sorted(set(bounds) - set(params))
    if extra:
        raise ValueError(f"{where}: constraints for parameters it does not hold: {extra[:3]}")


def check_optimizer_state(state: Any, where: str) -> None:
    """``pyro.optim``'s optimizer state (by parameter name, each a PyTorch optimizer's state dict)
    checked as data from outside."""
    if not isinstance(state, dict):
        raise ValueError(
            f"{where}: not an optimizer state (a dict by parameter name), got {type(state).__name__}"
        )
    for name, single in state.items():
        ok = isinstance(name, str) and isinstance(single, dict) and {"state", "param_groups"} <= single.keys()
        if not ok or not isinstance(single["state"], dict) or not isinstance(single["param_groups"], list):
            raise ValueError(f"{where}: the state of {name!r} is not a PyTorch optimizer's state dict")
