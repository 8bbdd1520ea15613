r"""What a trace would freeze, found before it is trusted.

A trace (:func:`torch.jit.trace`, and the recording that ``jit="compile"`` compiles) runs the
loss's Python once and keeps only the tensor operations. Two kinds of Python values are then
frozen into it:

* **Values read from tensors** (data-dependent control flow: ``if x.mean() > 0:``,
  ``int(t)``, ``t.item()``): the trace keeps the branch of the inputs it was made on.
  :func:`value_read_at` finds them by recording the loss once as a graph of ATen operations on
  the real tensors (:func:`torch.fx.experimental.proxy_tensor.make_fx`), which stops at the
  first such read; comparisons of *shapes* are not reads (shapes are Python ints there, and a
  trace is made per shape). The caller then runs the loss eagerly, and says where the read is.
* **Python attributes** of the model and the guide (``model.noise = 0.1``, a tensor attribute
  reassigned or changed in place, a new prior): :func:`python_state` gathers those of every
  module of both, and a change makes a new trace. Values outside the modules (globals,
  closures, attributes of objects that are not modules) cannot be seen: after changing one,
  call ``retrace()``.
"""

from __future__ import annotations

import operator
import os
import sysconfig
import traceback
import warnings
import weakref
from collections.abc import Callable, Hashable
from itertools import chain
from typing import Any

import torch

from ...nn.adapt import module_inside

__all__ = ["StateWatch", "changed_attribute", "python_state", "value_read_at"]

_PLAIN = frozenset({bool, int, float, str, type(None)})
# what every module holds for PyTorch and Pyro (hooks, children, parameters, the Pyro context):
# not values of the model; buffers and Pyro priors are read on their own
_INTERNAL = frozenset(vars(torch.nn.Module())) | {"_pyro_context", "_pyro_name", "_pyro_params"}
_LIBRARIES = (
    os.path.dirname(torch.__file__ or "") + os.sep,
    sysconfig.get_paths()["stdlib"] + os.sep,
    *(os.path.dirname(m.__file__ or "") + os.sep for m in (__import__("pyro"), __import__("pyro_dropout"))),
)
_READ = ("_local_scalar_dense", "data-dependent", "is_nonzero")


def _value_key(value: Any) -> Hashable | None:
    kind = type(value)
    if kind in _PLAIN:
        return value
    if isinstance(value, torch.Tensor):
        return ("tensor", id(value), value._version)
    if (kind is tuple or kind is list) and len(value) <= 32 and all(type(v) in _PLAIN for v in value):
        return tuple(value)
    return None  # an object the trace does not read as a value (or cannot be seen into)


_WATCHED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # module -> (len(vars), names)


def _watched(module: torch.nn.Module, attributes: dict) -> tuple[str, ...]:
    """The names of ``module``'s own attributes (not PyTorch's or Pyro's bookkeeping), found
    again when their number changes."""
    cached = _WATCHED.get(module)
    if cached is None or cached[0] != len(attributes):
        cached = (len(attributes), tuple(n for n in attributes if n not in _INTERNAL))
        _WATCHED[module] = cached
    return cached[1]


def _module_state(prefix: str, module: torch.nn.Module, state: list) -> None:
    attributes = vars(module)
    for name in _watched(module, attributes):
        key = _value_key(attributes[name])
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
    """:func:`python_state` of ``objects``, recomputed only when something it reads may have
    changed. Each call checks, in C (``map`` over the modules' dicts), that every module's
    attributes (by name), children, buffers and priors are the same objects as when the state was
    computed (held here, so that no new object can take an old one's address), that their tensors
    have the same in-place versions, and that their lists of numbers hold the same numbers: a few
    microseconds, where :func:`python_state` builds every name and key (tens). Where anything
    moved, the state is computed again, so the result is always the one :func:`python_state`
    gives."""

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
            and tuple(map(len, tables)) == self._table_sizes
            and all(map(operator.is_, now, self._held))
            and all(map(operator.is_, chain.from_iterable(map(dict.values, tables)), self._table_values))
            and all(map(operator.is_, chain.from_iterable(tables), self._table_keys))
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
        self._table_sizes = tuple(map(len, self._tables))
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
    """The first attribute whose value differs between two :func:`python_state`\\ s."""
    old = dict(before)
    for name, value in now:
        if old.get(name, value) != value or name not in old:
            return name
    return next((name for name, _ in before if name not in dict(now)), "an attribute")


def _where(error: BaseException) -> str:
    """The line that read the value: the innermost frame outside PyTorch, Pyro and this library
    (the user's code), else the innermost outside PyTorch."""
    frames = traceback.extract_tb(error.__traceback__)
    for outside in (_LIBRARIES, _LIBRARIES[:2]):
        mine = [f for f in frames if not f.filename.startswith((*outside, "<"))]
        if mine:
            f = mine[-1]
            return f"{f.filename}:{f.lineno} ({(f.line or '').strip()})"
    return "a line the traceback does not show"


def value_read_at(fn: Callable[..., torch.Tensor], inputs: tuple[torch.Tensor, ...]) -> str | None:
    """Where ``fn(*inputs)`` reads a tensor's value into Python ("file:line (code)"), or ``None``
    where it reads none, or where recording fails for another reason (nothing can be said). Run
    it under a forked random state: recording draws masks."""
    from torch.fx.experimental.proxy_tensor import make_fx

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            make_fx(fn, tracing_mode="real")(*inputs)
    except Exception as error:  # the first read stops the recording
        cause: BaseException | None = error
        read = None
        while cause is not None:  # the innermost error that says so has the reading line
            if any(word in str(cause) for word in _READ):
                read = cause
            cause = cause.__cause__ or cause.__context__
        if read is not None:
            return _where(read)
    return None
