"""Saving and resuming a ``CompiledSVI`` fit exactly: its parameters, its one optimizer's state and
the random state that draws the masks."""

from __future__ import annotations

import copy
from typing import Any

import torch
from pyro.util import get_rng_state, set_rng_state

__all__ = ["Resumable"]


class Resumable:
    """``state_dict`` / ``load_state_dict`` / ``setup`` for an SVI object with ``_names``,
    ``_params`` (None before the first step), ``_optimizer``, ``_pending`` (a state to load once the
    parameters exist) and ``_setup(args, kwargs)``, which creates the parameters and the optimizer."""

    _names: list[str]
    _params: list[torch.Tensor] | None
    _optimizer: torch.optim.Optimizer | None
    _pending: dict[str, Any] | None

    def _setup(self, args: tuple, kwargs: dict) -> None:
        raise NotImplementedError

    def setup(self, *args: Any, **kwargs: Any) -> None:
        """Create the parameters and the optimizer, as the first :meth:`step` does, without a
        step (arguments as for ``step``; only their shapes matter); then load a state given
        to :meth:`load_state_dict` before. Later calls do nothing."""
        if self._optimizer is None:
            self._setup(args, kwargs)
        if self._pending is not None:
            state, self._pending = self._pending, None
            self._load(state)

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
            "rng": _rng_state(self._params[0].device),
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
        _set_rng_state(state["rng"], self._params[0].device)


def _rng_state(device: torch.device) -> dict[str, Any]:
    state = get_rng_state()
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def _set_rng_state(state: dict[str, Any], device: torch.device) -> None:
    set_rng_state(state)
    if device.type == "cuda" and "cuda" in state:
        torch.cuda.set_rng_state(state["cuda"], device)
