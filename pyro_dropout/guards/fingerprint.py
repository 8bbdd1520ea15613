r"""The fingerprint of a Python value: what a recorded graph may have baked in of it.

A recorded graph freezes the Python values its code read: numbers, flags, strings, the contents of
containers and of objects' attributes, which modules and functions it called, and the tensors it
captured (by identity: a graph reads a captured tensor when it runs, so only a tensor whose value it
folded in at recording needs its in-place ``_version`` too). :class:`Fingerprinter` reads all of it,
deeply, into one hashable tuple; two equal fingerprints mean the graph would compute what the code
computes. A value whose reading would exceed :data:`BUDGET` entries raises :class:`TooLarge`: no
guard compares that much at every call.

While it reads, the fingerprinter notes each step it took (a container, a key, the object found
there), each container's size and each tensor's version: :class:`Watch` checks those again in a few
microseconds, and where none moved the fingerprint is the same without reading it again.
"""

from __future__ import annotations

import enum
import functools
import operator
import sys
import types
from typing import Any

import torch

__all__ = ["BUDGET", "MISSING", "Fingerprinter", "TooLarge", "Watch", "is_library"]

BUDGET = 20_000  # the entries one fingerprint may read: beyond, the value is too large to guard
_MAX_DEPTH = 40
_NUMBERS = frozenset({int, bool, float, complex, bytes})
_ATOMS = (torch.dtype, torch.device, torch.layout, torch.memory_format, enum.Enum, range, slice)
# what every nn.Module holds for PyTorch and Pyro: read on their own (parameters, buffers, children,
# hooks, Pyro's priors and parameter constraints) or not values of the model at all
# but its mode, ``training``, which ``F.dropout(x, p, self.training)`` reads
_MODULE_INTERNAL = (frozenset(vars(torch.nn.Module())) - {"training"}) | {"_pyro_context", "_pyro_name"}
# a library module's scratch, rebuilt at every call from what it was set up with (Pyro's AutoGuide)
_SCRATCH = frozenset({"plates", "prototype_trace", "_prototype_frames"})
_TABLES = ("_parameters", "_buffers", "_modules", "_forward_hooks", "_forward_pre_hooks", "_backward_hooks")
_PYRO_TABLES = ("_pyro_samples", "_pyro_params")
_LIBRARIES = ("torch", "pyro", "pyro_dropout")
_VERSION = operator.attrgetter("_version")
MISSING = object()  # an attribute, global or cell that is not there


class TooLarge(Exception):
    """A value whose fingerprint would read more than :data:`BUDGET` entries."""


def is_library(kind: type) -> bool:
    """Whether a class is PyTorch's, Pyro's or this library's: code that reads only its arguments
    and its objects' plain settings (not its internal objects: traces, caches, contexts)."""
    return (getattr(kind, "__module__", None) or "").partition(".")[0] in _LIBRARIES


def plain(value: Any) -> bool:
    """Numbers, strings, flags, tensors, and containers of them: what a library object's settings are."""
    kind = type(value)
    if kind is str or value is None or kind in _NUMBERS or isinstance(value, (torch.Tensor, *_ATOMS)):
        return True
    if isinstance(value, tuple | list | set | frozenset):
        return all(map(plain, value))
    if isinstance(value, dict):
        return all(map(plain, value.keys())) and all(map(plain, value.values()))
    return False


class Watch:
    """The steps a reading took, checked again: every container still holds the same objects at the
    same keys (and attributes on objects), has the same size, every tensor read by version has that
    version, every value compared by equality is equal."""

    def __init__(self, reader: Fingerprinter) -> None:
        self.at = tuple(e[0] for e in reader.items), tuple(e[1] for e in reader.items)
        self.found = tuple(e[2] for e in reader.items)
        self.on = tuple(e[0] for e in reader.attributes), tuple(e[1] for e in reader.attributes)
        self.attribute_values = tuple(e[2] for e in reader.attributes)
        self.sized = tuple(reader.sized)
        self.sizes = tuple(map(len, self.sized))
        self.tensors = tuple(t for t, _ in reader.versions)
        self.versions = tuple(v for _, v in reader.versions)
        self.equal = tuple(reader.equal)

    def holds(self) -> bool:
        try:
            if not all(map(operator.is_, map(operator.getitem, *self.at), self.found)):
                return False
            if not all(map(operator.is_, map(getattr, *self.on), self.attribute_values)):
                return False
        except (KeyError, IndexError, AttributeError, TypeError):
            return False
        return (
            tuple(map(len, self.sized)) == self.sizes
            and tuple(map(_VERSION, self.tensors)) == self.versions
            and all(read() == value for read, value in self.equal)
        )


class Fingerprinter:
    """One reading of values: ``live`` are the ids of tensors a graph reads when it runs (inputs and
    captured tensors it did not fold: their in-place version is not part of the fingerprint);
    ``versions=False`` reads no version at all; ``kept`` holds every object the fingerprint names by
    its id (tensors, functions, classes), so that a fingerprint kept with a graph keeps those ids from
    being reused (a module is named by what it holds, not its id: a graph kept with a guide does not
    keep the guide alive); ``seen``, the ids of the mutable containers and objects read, in order
    (each held until the reading ends); ``items``, ``attributes``, ``sized``, ``versions`` and
    ``equal``: the steps taken, for :class:`Watch`."""

    def __init__(self, live: frozenset[int] = frozenset(), versions: bool = True) -> None:
        self.live, self.read_versions = live, versions
        self.kept: list[Any] = []
        self.alive: list[Any] = []  # what the reading holds until it ends (its ids in ``seen``)
        self.count = 0
        self.seen: dict[int, int] = {}
        self.items: list[tuple[Any, Any, Any]] = []
        self.attributes: list[tuple[Any, str, Any]] = []
        self.sized: list[Any] = []
        self.versions: list[tuple[torch.Tensor, int]] = []
        self.equal: list[tuple[Any, Any]] = []

    def __call__(self, value: Any, depth: int = 0) -> Any:
        self.count += 1
        if self.count > BUDGET or depth > _MAX_DEPTH:
            raise TooLarge(f"more than {BUDGET} values, or nested more than {_MAX_DEPTH} deep")
        kind = type(value)
        if kind is str or value is None:
            return value
        if kind in _NUMBERS:
            return (kind, value) if value == value else (kind, "nan")
        if isinstance(value, torch.Tensor):
            return self._tensor(value)
        if isinstance(value, _ATOMS):
            return value
        if isinstance(value, tuple):  # named tuples, torch.Size too
            return (kind, tuple(self(v, depth + 1) for v in value))
        order = self.seen.get(id(value))
        if order is not None:  # a mutable container or object read before: shared, or a cycle
            return ("seen", order)
        self.seen[id(value)] = len(self.seen)
        self.alive.append(value)  # held until the reading ends: its id is not reused meanwhile
        if kind is list or isinstance(value, dict):
            return (
                kind,
                self.entries(value, value.keys() if isinstance(value, dict) else range(len(value)), depth),
            )
        if kind is set or kind is frozenset:
            self.equal.append((functools.partial(frozenset, value), frozenset(value)))
            return (kind, frozenset(self(v, depth + 1) for v in value))
        return self._object(value, depth)

    def entries(self, container: Any, keys: Any, depth: int) -> tuple:
        """``(key, fingerprint)`` of the entries of ``container`` at ``keys`` (a dict's, a list's)."""
        self.sized.append(container)
        found = []
        for key in keys:
            value = container[key]
            self.items.append((container, key, value))
            found.append((self(key, depth + 1), self(value, depth + 1)))
        return tuple(found)

    def _tensor(self, t: torch.Tensor) -> tuple:
        self.kept.append(t)
        version = None
        if self.read_versions and id(t) not in self.live:
            version = t._version
            self.versions.append((t, version))
        return ("tensor", id(t), t.shape, t.dtype, t.device, t.requires_grad, version)

    def identity(self, value: Any) -> tuple:
        """A value read by what it is, not by what it holds (a class, a library function)."""
        self.kept.append(value)
        return ("id", id(value))

    def _attribute(self, owner: Any, name: str, depth: int) -> Any:
        value = getattr(owner, name, MISSING)
        self.attributes.append((owner, name, value))
        return None if value is MISSING else self(value, depth + 1)

    def _object(self, value: Any, depth: int) -> Any:
        if isinstance(value, torch.nn.Module):
            return self.module(value, depth)
        if isinstance(value, types.FunctionType):
            defaults = (
                self._attribute(value, "__defaults__", depth),
                self._attribute(value, "__kwdefaults__", depth),
            )
            return ("function", self.identity(value), defaults)
        if isinstance(value, types.MethodType):
            return ("method", self.identity(value.__func__), self(value.__self__, depth + 1))
        if isinstance(value, functools.partial):
            return ("partial", self(value.func, depth + 1), self(value.args, depth + 1), self(value.keywords))
        if isinstance(value, type):
            return ("class", self.identity(value), self.class_settings(value, depth))
        if isinstance(value, types.ModuleType | types.BuiltinFunctionType | types.CodeType):
            return self.identity(value)
        numpy = sys.modules.get("numpy")
        if numpy is not None and isinstance(value, numpy.ndarray):
            self.count += value.nbytes // 64  # 64 bytes an entry of the budget
            if self.count > BUDGET:
                raise TooLarge(f"a NumPy array of {value.nbytes} bytes")
            self.equal.append((value.tobytes, value.tobytes()))
            return ("array", value.shape, value.dtype.str)
        return self._attributes(value, depth)

    def _attributes(self, value: Any, depth: int) -> tuple:
        """An object by its class and attributes (``__dict__`` and ``__slots__``); one with neither
        (a C object) by identity. A library object's plain settings only."""
        kind = type(value)
        state = getattr(value, "__dict__", None)
        slots = [s for k in kind.__mro__ for s in getattr(k, "__slots__", ()) if isinstance(s, str)]
        if not isinstance(state, dict) and not slots:
            return self.identity(value)
        items: tuple = ()
        if isinstance(state, dict):
            keys = [k for k, v in state.items() if not is_library(kind) or plain(v)]
            items = self.entries(state, keys, depth)
        slotted = tuple((name, self._attribute(value, name, depth)) for name in slots)
        return ("object", self.identity(kind), self.class_settings(kind, depth), items, slotted)

    def class_settings(self, kind: type, depth: int) -> tuple:
        """The plain class attributes of a user's class and its user bases (``self.SCALE``): read at
        every reading, as a class attribute may be set at any time."""
        found = []
        for base in kind.__mro__:
            if base is object or is_library(base) or base.__module__ == "builtins":
                continue
            space = vars(base)
            keys = [k for k, v in space.items() if not k.startswith("__") and plain(v)]
            found.append(self.entries(space, keys, depth))
        return tuple(found)

    def module(self, module: torch.nn.Module, depth: int = 0) -> tuple:
        """A module: its mode and settings (a library module's plain ones only; a user's module's
        every attribute), its parameters and buffers (tensors), hooks, Pyro priors and parameter
        constraints, and its children."""
        space = vars(module)
        library = is_library(type(module))
        keys = [
            k
            for k, v in space.items()
            if k not in _MODULE_INTERNAL and (not library or (k not in _SCRATCH and plain(v)))
        ]
        settings = self.entries(space, keys, depth)
        tables = self.entries(space, [n for n in (*_TABLES, *_PYRO_TABLES) if n in space], depth)
        return ("module", type(module), self.class_settings(type(module), depth), settings, tables)
