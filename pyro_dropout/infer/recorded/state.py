r"""What a recorded graph's key holds: the call's arguments (:func:`call_key`: tensors by shape,
dtype and device, other values as they are) and the Python values of the model's and guide's modules
that a graph would freeze (:class:`StateWatch`). Values outside the modules, such as globals, are
found by :mod:`~.checks`' spot checks."""

from __future__ import annotations

import operator
import weakref
from collections.abc import Hashable
from itertools import chain
from typing import Any

import torch

from ...nn.adapt import module_inside

__all__ = ["StateWatch", "call_key", "changed_attribute", "python_state", "tensors_of", "with_tensors"]

_PLAIN = frozenset({bool, int, float, str, type(None)})
# what every module holds for PyTorch and Pyro (hooks, children, parameters, the Pyro context) but
# its mode (``training``, which F.dropout may read): not values of the model; buffers and Pyro priors
# are read on their own
_INTERNAL = (frozenset(vars(torch.nn.Module())) - {"training"}) | {
    "_pyro_context",
    "_pyro_name",
    "_pyro_params",
}


def _static(value: Any) -> Hashable:
    if isinstance(value, torch.Tensor):
        return ("tensor", tuple(value.shape), value.dtype, value.device)
    try:
        hash(value)
        return value
    except TypeError:
        return ("id", id(value))


def call_key(args: tuple, kwargs: dict) -> Hashable:
    """What a graph of a call depends on: its tensors' shapes, dtypes and devices, other values."""
    return tuple(map(_static, args)), tuple(sorted((k, _static(v)) for k, v in kwargs.items()))


def tensors_of(args: tuple, kwargs: dict) -> tuple[torch.Tensor, ...]:
    """The tensors among a call's arguments, in order: a graph's inputs."""
    return tuple(a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor))


def with_tensors(args: tuple, kwargs: dict, tensors: tuple) -> tuple[tuple, dict]:
    """The call's arguments with ``tensors`` put in place of its own (:func:`tensors_of`'s order)."""
    given = iter(tensors)

    def swap(value: Any) -> Any:
        return next(given) if isinstance(value, torch.Tensor) else value

    return tuple(map(swap, args)), {k: swap(v) for k, v in kwargs.items()}


def _value_key(value: Any) -> Hashable | None:
    kind = type(value)
    if kind in _PLAIN:
        return value
    if isinstance(value, torch.Tensor):
        return ("tensor", id(value), value._version)
    if (kind is tuple or kind is list) and len(value) <= 32 and all(type(v) in _PLAIN for v in value):
        return tuple(value)
    return None  # an object the trace does not read as a value (or cannot be seen into)


def _module_state(prefix: str, module: torch.nn.Module, state: list) -> None:
    attributes = vars(module)
    for name, value in attributes.items():
        key = None if name in _INTERNAL else _value_key(value)
        if key is not None:
            state.append((prefix + name, key))
    for table in (attributes["_buffers"], attributes.get("_pyro_samples") or {}):
        for name, value in table.items():
            state.append((prefix + name, _value_key(value) or ("object", id(value))))


def python_state(*objects: Any) -> tuple[tuple[str, Hashable], ...]:
    """The Python values a trace of ``objects`` (the model, the guide) would freeze: every
    plain attribute (numbers, strings, flags), tensor attribute and buffer (by identity and
    in-place version) and Pyro prior of each of their modules, by dotted name. A module wrapped
    by Pyro's handlers (``poutine.block(model, ...)``) is read inside them."""
    state: list[tuple[str, Hashable]] = []
    for i, obj in enumerate(map(module_inside, objects)):
        if obj is not None:
            top = "model." if i == 0 else "guide."
            for prefix, module in obj.named_modules():
                _module_state(f"{top}{prefix}." if prefix else top, module, state)
    return tuple(state)


_VERSION = operator.attrgetter("_version")
_CALL = getattr(operator, "call", lambda fn, arg: fn(arg))  # operator.call: Python 3.11


class StateWatch:
    """:func:`python_state` of ``objects``, recomputed only where something it reads may have
    changed: a check in C (``map`` over the modules' dicts) that every attribute, child, buffer and
    prior is the object it was (held here), with its in-place version, and every list of numbers
    holds its numbers; a few microseconds, where :func:`python_state` takes tens."""

    def __init__(self, *objects: Any) -> None:
        # held weakly (no cycle keeps a model alive); an object that is no module reads as None
        self._objects = [(lambda: None) if o is None else weakref.ref(o) for o in map(module_inside, objects)]
        self._state: tuple = ()
        self._attributes: tuple[dict, ...] = ()

    def __call__(self) -> tuple[tuple[str, Hashable], ...]:
        if self._attributes and self._unchanged():
            return self._state
        objects = [ref() for ref in self._objects]
        self._state = python_state(*objects)
        self._remember([m for o in objects if isinstance(o, torch.nn.Module) for _, m in o.named_modules()])
        return self._state

    def _unchanged(self) -> bool:
        tables = self._tables
        try:
            now = tuple(chain.from_iterable(map(_CALL, self._getters, self._attributes)))
        except KeyError:  # an attribute deleted
            return False
        return (
            tuple(map(len, self._attributes)) == self._sizes
            and tuple(chain.from_iterable(tables)) == self._table_keys  # the same names, in order
            and all(map(operator.is_, now, self._held))
            and all(map(operator.is_, chain.from_iterable(map(dict.values, tables)), self._table_values))
            and tuple(map(_VERSION, self._tensors)) == self._versions
            and all(_value_key(owner[name]) == key for owner, name, key in self._lists)
        )

    def _remember(self, modules: list[torch.nn.Module]) -> None:
        attributes = tuple(vars(m) for m in modules)
        tables = [t for a in attributes for t in (a["_modules"], a["_buffers"], a.get("_pyro_samples"))]
        self._attributes, self._tables = attributes, tuple(t for t in tables if isinstance(t, dict))
        # two internal names besides the watched ones: the getter always returns a tuple
        self._getters = tuple(
            operator.itemgetter(*(n for n in a if n not in _INTERNAL), "_modules", "_buffers")
            for a in attributes
        )
        self._sizes = tuple(map(len, attributes))
        self._held = tuple(chain.from_iterable(map(_CALL, self._getters, attributes)))
        self._table_values = tuple(chain.from_iterable(map(dict.values, self._tables)))
        self._table_keys = tuple(chain.from_iterable(self._tables))
        self._tensors = tuple(v for v in (*self._held, *self._table_values) if isinstance(v, torch.Tensor))
        self._versions = tuple(map(_VERSION, self._tensors))
        # python_state reads a list of numbers by its contents (any other list not at all): a list
        # changed in place, into or out of that kind, is seen
        self._lists = tuple(
            (a, n, _value_key(v))
            for a in attributes
            for n, v in a.items()
            if n not in _INTERNAL and type(v) is list
        )


def changed_attribute(before: tuple, now: tuple) -> str:
    r"""The first name (in sorted order) whose value differs between two :func:`python_state`\ s."""
    return min((name for name, _ in set(before) ^ set(now)), default="an attribute")
