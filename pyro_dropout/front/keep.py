"""Keeping a front door: its fitted state in a file that holds tensors and plain values only
(written by ``torch.save``, read back with ``weights_only=True``: a crafted file runs nothing), and
the network with its refined weights as a plain ``nn.Module`` to deploy.

The file holds what cannot be rebuilt from the network: the guide's parameters (unconstrained, as
Pyro's param store keeps them), the settings ``MCDropout`` was made with, the noise level and where
it came from, and the shapes and dtypes of the inputs (one row of each per-example input, the whole
of a shared one: the guide's structure is set up from them)."""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any, cast

import pyro
import torch

from ..nn.converted.learned_rates import plain_dropouts
from ..runtime import write_atomically

__all__ = [
    "FORMAT",
    "check_options",
    "example_inputs",
    "input_spec",
    "param_names",
    "read_state",
    "refined_module",
    "restore_params",
    "saved_params",
    "write_state",
]

FORMAT = "pyro_dropout.MCDropout/2"
_FORMATS = ("pyro_dropout.MCDropout/1", FORMAT)  # /1: one input tensor, its row as "row"
_PREFIX = "{front}"  # the instance's name in Pyro's store, replaced by the loading instance's
_PLAIN = (str, int, float, bool, type(None))


def check_options(options: dict[str, Any], where: str) -> None:
    """Settings a file can hold: plain values, and lists or tuples of them."""
    for key, value in options.items():
        items = value if isinstance(value, list | tuple) else [value]
        if not all(isinstance(v, _PLAIN) for v in items):
            raise ValueError(
                f"{where}: the setting {key}={value!r} is not a plain value (str, number, bool, None or a "
                "list of them), so no file can hold it: make the front door with plain settings to keep it"
            )


def input_spec(inputs: Any, where: str) -> dict[str, Any]:
    """What the file keeps of a batch's :class:`~pyro_dropout.nn.converted.inputs.Inputs`: how they
    are given (one tensor, a tuple, a dict) and, for each, its name, whether it is per example, and
    its shape (a row's, per example) and dtype, or its plain value."""
    kind = "tensor" if isinstance(inputs.given, torch.Tensor) else type(inputs.given).__name__
    leaves = []
    for name, value, batched in zip(inputs.names, inputs.values, inputs.batched, strict=True):
        if isinstance(value, torch.Tensor):
            shape = list(value.shape[1:] if batched else value.shape)
            dtype = str(value.dtype).removeprefix("torch.")
            leaves.append({"name": name, "batched": batched, "shape": shape, "dtype": dtype})
        elif isinstance(value, _PLAIN):
            leaves.append({"name": name, "batched": False, "value": value})
        else:
            raise ValueError(
                f"{where}: the input {name!r} is a {type(value).__name__}, which no file can hold: give "
                "the network's inputs as tensors and plain values"
            )
    return {"kind": kind, "leaves": leaves}


def example_inputs(spec: dict[str, Any], device: torch.device | None) -> Any:
    """Inputs shaped as ``spec`` says, of zeros (two rows per example; token ids of zeros are ids
    too, and an index of zeros points at the first row)."""
    values = []
    for leaf in spec["leaves"]:
        if "value" in leaf:
            values.append(leaf["value"])
            continue
        shape = [2, *leaf["shape"]] if leaf["batched"] else leaf["shape"]
        values.append(torch.zeros(shape, dtype=getattr(torch, leaf["dtype"]), device=device))
    if spec["kind"] == "tensor":
        return values[0]
    if spec["kind"] == "dict":
        return {leaf["name"]: v for leaf, v in zip(spec["leaves"], values, strict=True)}
    return tuple(values)


def _check_spec(spec: Any, path: Any) -> dict[str, Any]:
    if not isinstance(spec, dict) or spec.get("kind") not in ("tensor", "tuple", "dict"):
        raise _bad(path, "the inputs' description is not one of a tensor, a tuple or a dict")
    leaves = spec.get("leaves")
    if not isinstance(leaves, list) or not leaves or (spec["kind"] == "tensor" and len(leaves) != 1):
        raise _bad(path, "the inputs' description holds no input, or several for one tensor")
    for leaf in leaves:
        if not isinstance(leaf, dict) or not isinstance(leaf.get("name"), str):
            raise _bad(path, "an input is described without its name")
        if "value" in leaf:
            if not isinstance(leaf["value"], _PLAIN):
                raise _bad(path, f"the input {leaf['name']!r} holds a value that is not plain")
            continue
        shape, batched = leaf.get("shape"), leaf.get("batched")
        if not isinstance(batched, bool) or not isinstance(shape, list):
            raise _bad(path, f"the input {leaf['name']!r} has no shape or no per-example flag")
        if not all(isinstance(d, int) and not isinstance(d, bool) and 0 < d <= 2**31 for d in shape):
            raise _bad(path, f"the input {leaf['name']!r}'s shape is not a list of positive ints")
        if not isinstance(getattr(torch, str(leaf.get("dtype")), None), torch.dtype):
            raise _bad(path, f"the input {leaf['name']!r}'s dtype {leaf.get('dtype')!r} is not a torch dtype")
    return spec


def param_names(model: Any, guide: Any, example: Any) -> list[str]:
    """The names of the parameters that ``guide`` and ``model`` read at ``example``."""
    with torch.no_grad(), pyro.poutine.trace(param_only=True) as capture:
        trace = pyro.poutine.trace(guide).get_trace(example)
        pyro.poutine.replay(model, trace=trace)(example)
    return list(capture.trace.nodes)


def write_state(path: str | os.PathLike, state: dict[str, Any]) -> Path:
    """``state`` to ``path`` atomically (a temporary file in the same folder, then a rename); a
    link at ``path`` is refused, not followed."""
    if not Path(path).parent.is_dir():
        raise ValueError(f"MCDropout.save: {Path(path).parent} is not a folder")
    return write_atomically(path, lambda temporary: torch.save(state, temporary), "MCDropout.save")


def _bad(path: Any, what: str) -> ValueError:
    return ValueError(f"MCDropout.load: {path}: {what}")


def read_state(path: str | os.PathLike) -> dict[str, Any]:
    """The state in ``path``, read with ``weights_only=True`` and checked field by field."""
    if not Path(path).is_file():
        raise _bad(path, "no such file")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # truncated, another format, a pickle of other objects
        raise _bad(
            path, f"not a file written by MCDropout.save ({type(error).__name__}: {str(error)[:200]})"
        ) from None
    if not isinstance(state, dict) or state.get("format") not in _FORMATS:
        raise _bad(path, f"not a file written by MCDropout.save (its format is not {FORMAT!r})")
    if state["format"] == _FORMATS[0] and isinstance(state.get("row"), dict):  # one tensor's row
        row = state.pop("row")
        state["inputs"] = {"kind": "tensor", "leaves": [{"name": "x", "batched": True, **row}]}
    fields = {"task": str, "num_samples": int, "options": dict, "params": dict, "inputs": dict, "noise": list}
    for key, kind in fields.items():
        if not isinstance(state.get(key), kind):
            raise _bad(path, f"the field {key!r} is missing or not a {kind.__name__}")
    for name, value in state["params"].items():
        if not isinstance(name, str) or not isinstance(value, torch.Tensor):
            raise _bad(path, f"the parameter {name!r} is not a named tensor")
        if value.is_floating_point() and not bool(torch.isfinite(value).all()):
            raise _bad(path, f"the parameter {name!r} holds NaN or infinite values")
    _check_spec(state["inputs"], path)
    state.setdefault("shared", [])
    state.setdefault("concrete", False)
    if not isinstance(state["concrete"], bool):
        raise _bad(path, "the field 'concrete' is not True or False")
    if not isinstance(state["shared"], list) or not all(isinstance(n, str) for n in state["shared"]):
        raise _bad(path, "the field 'shared' is not a list of input names")
    check_options(state["options"], f"MCDropout.load: {path}")
    return state


def _unconstrained(name: str) -> torch.Tensor:
    """The tensor Pyro's store keeps for ``name`` (its optimiser's), not the constrained view."""
    return cast(torch.Tensor, cast(Any, pyro.param(name)).unconstrained())


def saved_params(names: list[str], front: str) -> dict[str, torch.Tensor]:
    """The unconstrained values of ``names``, the instance's name ``front`` written as a placeholder."""
    return {name.replace(front, _PREFIX, 1): _unconstrained(name).detach().cpu().clone() for name in names}


def restore_params(saved: dict[str, torch.Tensor], names: list[str], front: str, path: Any) -> None:
    """Put ``saved`` into the parameters ``names`` of this instance (named ``front``); every name
    and shape must match."""
    wanted = {name.replace(front, _PREFIX, 1): name for name in names}
    missing, extra = sorted(set(wanted) - set(saved)), sorted(set(saved) - set(wanted))
    if missing or extra:
        raise _bad(
            path,
            f"its parameters do not match this network's (missing {missing[:3]}, not in the network "
            f"{extra[:3]}): saved from another network, or with other settings?",
        )
    for key, name in wanted.items():
        target = _unconstrained(name)
        if target.shape != saved[key].shape:
            raise _bad(
                path,
                f"the parameter {key!r} has shape {tuple(saved[key].shape)}, "
                f"the network's {tuple(target.shape)}",
            )
        with torch.no_grad():
            target.copy_(saved[key].to(target.device, target.dtype))


def refined_module(
    source: torch.nn.Module | None, model: Any, means: dict[str, torch.Tensor]
) -> torch.nn.Module:
    """A copy of the unconverted network ``source`` with each converted layer's parameters set to
    the guide's means ``means`` (by site), trainable, in eval mode."""
    if source is None:
        raise ValueError(
            "MCDropout.to_module: this front door was made with masks='shared' (its layers replaced), "
            "which keeps no copy of the network to put the weights into: use the default masks='own'"
        )
    net = copy.deepcopy(source)
    weights = model.source.weights(means, {site: value.dim() for site, value in means.items()}, None)
    own = dict(net.named_parameters())
    with torch.no_grad():
        for name, value in weights.items():
            own[name].copy_(value.to(own[name].dtype))
    plain_dropouts(net)  # learned rates (concrete=True): nn.Dropout at each
    for parameter in net.parameters():
        parameter.requires_grad_(True)  # a network to train or deploy
    return net.eval()
