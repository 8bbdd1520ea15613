r"""A guard: everything a recording read, read again before every replay.

A :class:`Guard` holds roots, each a name and a way to read it now: the model, the guide and the
objective (their modules' modes, settings, parameters, buffers, hooks and priors), the state of
PyTorch and Pyro a graph freezes (:func:`runtime_state`), and the globals, closure variables and
imported modules the user's code read while the call was recorded (:func:`found_roots`, from
:mod:`.reads`). Its fingerprint (:mod:`.fingerprint`) is part of a graph's key: a graph runs a call
only where the fingerprint now is the one it was recorded with. A call's own arguments are its
:func:`signature`: the tree of its containers, each tensor's shape, dtype, device and whether it
requires a gradient, and the fingerprint of every other value.
"""

from __future__ import annotations

import builtins
import gc
import operator
import os
import sys
import weakref
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from functools import partial
from types import CodeType, FunctionType, ModuleType
from typing import Any, cast

import pyro
import torch

from .fingerprint import MISSING, Fingerprinter, Watch
from .reads import Reads
from .trees import flatten, unflatten

__all__ = [
    "Guard",
    "Root",
    "Snapshot",
    "found_roots",
    "object_roots",
    "pyro_handlers",
    "restoring",
    "runtime_state",
    "set_torch_rng",
    "signature",
    "tensors_of",
    "torch_rng",
    "with_tensors",
]

Root = tuple[str, Callable[[], Any]]  # a name for messages, and how to read the value now


def tensors_of(args: tuple, kwargs: dict) -> list[torch.Tensor]:
    """The tensors among a call's arguments, inside containers too, in order: a graph's inputs."""
    return [leaf for leaf in flatten((args, kwargs))[0] if isinstance(leaf, torch.Tensor)]


def with_tensors(args: tuple, kwargs: dict, tensors: tuple) -> tuple[tuple, dict]:
    """The call's arguments with ``tensors`` in place of its own (:func:`tensors_of`'s order)."""
    leaves, spec = flatten((args, kwargs))
    given = iter(tensors)
    call = unflatten([next(given) if isinstance(v, torch.Tensor) else v for v in leaves], spec)
    return call[0], call[1]


def signature(args: tuple, kwargs: dict) -> Hashable:
    """What a graph of a call depends on in its arguments: their tree, each tensor's shape, dtype,
    device and gradient flag, every other value's fingerprint (keyword arguments included)."""
    leaves, spec = flatten((args, kwargs))
    read = Fingerprinter(versions=False)
    keys = tuple(
        (v.shape, v.dtype, v.device, v.requires_grad) if isinstance(v, torch.Tensor) else read(v)
        for v in leaves
    )
    return spec, keys


def runtime_state() -> tuple:
    """The state of PyTorch and Pyro a graph freezes: grad and inference modes, the default dtype,
    deterministic algorithms, autocast, Pyro's settings, the global module hooks."""
    hooks = torch.nn.modules.module
    return (
        torch.is_grad_enabled(),
        torch.is_inference_mode_enabled(),
        torch.get_default_dtype(),
        torch.are_deterministic_algorithms_enabled(),
        torch.is_autocast_enabled(),
        tuple(sorted(pyro.settings.get().items())),
        tuple(len(getattr(hooks, n, ())) for n in ("_global_forward_hooks", "_global_forward_pre_hooks")),
    )


def pyro_handlers() -> str:
    """The first Pyro handler around this call that a replayed graph would bypass (``poutine.scale``,
    a trace of sample sites, ...), "" for none: ``SVI.step``'s own trace of the parameters is no such."""
    for handler in pyro.poutine.runtime._PYRO_STACK:
        if not getattr(handler, "param_only", False):
            return type(handler).__name__
    return ""


def _user_module(module: ModuleType) -> bool:
    path = getattr(module, "__file__", None) or ""
    spots = [os.path.dirname(m.__file__ or "") for m in (torch, pyro, os)]
    return bool(path) and not any(path.startswith(s) for s in spots) and "site-packages" not in path


def _global(space: dict, name: str) -> Any:
    return space.get(name, builtins.__dict__.get(name, MISSING))


def _chain(space: dict, name: str, path: tuple[str, ...]) -> Any:
    """What an attribute chain from a global module reaches (``config.NOISE``), as far as it goes
    through modules."""
    found = _global(space, name)
    for attribute in path:
        if not isinstance(found, ModuleType):
            break
        found = getattr(found, attribute, MISSING)
    return found


def _cell(cell: Any) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell
        return MISSING


def _closures(codes: set[CodeType]) -> list[Root]:
    """The closure variables of the functions whose code ran (found among the live objects)."""
    if not codes:
        return []
    ids, found = {id(c) for c in codes}, cast(list[Root], [])
    for fn in gc.get_referrers(*codes):
        if isinstance(fn, FunctionType) and id(fn.__code__) in ids and fn.__closure__:
            for name, cell in zip(fn.__code__.co_freevars, fn.__closure__, strict=True):
                found.append((f"the closure variable {name} of {fn.__qualname__}", partial(_cell, cell)))
    return found


def found_roots(reads: Reads) -> list[Root]:
    """The globals (and the attribute chains followed from global modules), closure variables and
    user modules a watched run read: each root reads an object that persists between calls."""
    roots: list[Root] = []
    for space, names, chains in reads.globals.values():
        where = space.get("__name__", "?")
        for name in sorted(names):
            value = _global(space, name)
            roots.append((f"the global {name} of {where}", partial(_global, space, name)))
            if isinstance(value, ModuleType):
                for path in sorted(c[1:] for c in chains if c[0] == name and len(c) > 1):
                    label = f"the global {'.'.join((name, *path))} of {where}"
                    roots.append((label, partial(_chain, space, name, path)))
                if _user_module(value):
                    roots.append((f"the module {value.__name__}", partial(vars, value)))
    roots += _closures(reads.codes)
    for name in sorted(reads.imports):
        module = sys.modules.get(name)
        if isinstance(module, ModuleType) and _user_module(module):
            roots.append((f"the module {name}", partial(vars, module)))
    return roots


class Guard:
    """Roots read on every call (see the module's docs), and PyTorch's and Pyro's state
    (:func:`runtime_state`); ``live``: the ids of tensors the graph reads when it runs, whose in-place
    versions are not part of the fingerprint. :meth:`now` reads the fingerprint, quickly where
    nothing the last reading stepped through moved."""

    def __init__(self, roots: list[Root]) -> None:
        self.roots = roots
        self.live: frozenset[int] = frozenset()
        self._last: tuple[tuple, tuple, Watch] | None = None  # fingerprint, root values, watch

    def read(self, versions: bool = True) -> tuple[tuple, Fingerprinter]:
        """The fingerprint now, read in full, and its reader (``kept``: the objects it read by
        identity, to keep with a graph; ``seen``: the ids of the containers it read)."""
        reader = Fingerprinter(self.live, versions)
        values = tuple(get() for _, get in self.roots)
        fingerprint = (runtime_state(), *map(reader, values))
        if versions:  # a root read through a weak reference is held by it (_held)
            pairs = zip(self.roots, values, strict=True)
            held = tuple(get if isinstance(get, weakref.ref) else v for (_, get), v in pairs)
            self._last = fingerprint, held, Watch(reader)
        return fingerprint, reader

    def now(self) -> tuple:
        """The fingerprint now: the last one where the roots are the objects they were, PyTorch's and
        Pyro's state is the same and the last reading's watch holds, else read in full."""
        last = self._last
        if (
            last is not None
            and all(map(operator.is_, (get() for _, get in self.roots), map(_held, last[1])))
            and runtime_state() == last[0][0]
            and last[2].holds()
        ):
            return last[0]
        return self.read()[0]

    def change(self, before: tuple, now: tuple) -> str:
        """The name of the first root whose fingerprint differs."""
        names = ["PyTorch's and Pyro's modes and settings", *(name for name, _ in self.roots)]
        for name, a, b in zip(names, before, now, strict=False):
            if a != b:
                return name
        return "the number of values read"


def _held(value: Any) -> Any:
    return value() if isinstance(value, weakref.ref) else value


def object_roots(model: Any, guide: Any, objective: Any = None, weak: bool = False) -> list[Root]:
    """Pyro's param store, the model, the guide and the objective as roots (a function's own globals
    are found when it runs); ``weak``: read through weak references where they can be (roots kept
    with the guide itself, which must not keep it alive)."""
    roots: list[Root] = [
        ("Pyro's param store", partial(_store_table, "_params")),
        ("the constraints of Pyro's parameters", partial(_store_table, "_constraints")),
    ]
    for name, value in (("the model", model), ("the guide", guide), ("the loss's settings", objective)):
        if value is not None and not isinstance(value, FunctionType):
            roots.append((name, _reader(value, weak)))
    return roots


def _reader(value: Any, weak: bool) -> Callable[[], Any]:
    if weak:
        try:
            return weakref.ref(value)
        except TypeError:  # not weakly referable
            pass
    return partial(_same, value)


def _same(value: Any) -> Any:
    return value


def _store_table(name: str) -> Any:
    return getattr(pyro.get_param_store(), name)


def torch_rng(device: torch.device) -> tuple[Any, Any]:
    """PyTorch's random state on the CPU and, for a CUDA device, on that device."""
    return torch.get_rng_state(), torch.cuda.get_rng_state(device) if device.type == "cuda" else None


def set_torch_rng(state: tuple[Any, Any], device: torch.device) -> None:
    torch.set_rng_state(state[0])
    if state[1] is not None:
        torch.cuda.set_rng_state(state[1], device)


class Snapshot:
    """The values of the tensors among ``kept`` that are no parameters (a batch norm's running
    statistics, a counter), and PyTorch's random state, taken now, to go back to."""

    def __init__(self, kept: list[Any], device: torch.device) -> None:
        tensors = {id(t): t for t in kept if isinstance(t, torch.Tensor)}.values()
        self.copies = [(t, t.detach().clone()) for t in tensors if not t.requires_grad]
        self.versions = [(t, t._version) for t in tensors if t.requires_grad]
        self.rng, self.device = torch_rng(device), device

    def covers(self, tensors: list[torch.Tensor]) -> bool:
        """Whether every tensor of ``tensors`` is one this snapshot can put back."""
        held = {id(t) for t, _ in self.copies}
        return all(id(t) in held for t in tensors)

    def restore(self) -> list[str]:
        """Put the values and the random state back; the parameters changed in place meanwhile
        (which no copy was kept of), named."""
        with torch.no_grad():
            for tensor, copy in self.copies:
                if not torch.equal(tensor, copy):
                    tensor.copy_(copy)
        set_torch_rng(self.rng, self.device)
        return [f"a parameter of shape {tuple(t.shape)}" for t, v in self.versions if t._version != v]


@contextmanager
def restoring(kept: list[Any], device: torch.device) -> Iterator[list[str]]:
    """Within the block, passes that only record (a graph's recording, its admission) may draw random
    numbers and change tensors in place; after it, the random state is what it was, and every tensor
    among ``kept`` that is no parameter has its values back. The list it yields names, when the block
    ends, the parameters the passes changed in place (which no copy was kept of)."""
    snapshot = Snapshot(kept, device)
    changed: list[str] = []
    try:
        yield changed
    finally:
        changed += snapshot.restore()
