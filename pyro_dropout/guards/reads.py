r"""What one run of a function read outside PyTorch, Pyro and this library, found while it runs.

:func:`watching` runs a block under ``sys.setprofile`` and a dispatch mode and fills :class:`Reads`:
the globals and closure variables the user's code loaded (with the attribute chains it followed from
a global, ``config.NOISE``) and the modules it imported, and, where no guard could cover what the run
did, why (:attr:`Reads.refused`, naming the file and line): a tensor's value read into Python, or a
shape that depends on values; a call whose result no fingerprint can foresee (the clock, Python's or
NumPy's random numbers, a print); a write to a global, a closure variable, or a container a global
holds.

The user's code is every file outside PyTorch, Pyro, this library, the installed packages and
Python's standard library; an installed package's code (a Hugging Face model's) counts as the user's
where it is a method of an ``nn.Module`` or where the user's code called it, and the standard
library's where the user's code called it (not where PyTorch calls ``tqdm`` for itself, say).
"""

from __future__ import annotations

import builtins
import dis
import functools
import os
import random
import sys
import sysconfig
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from types import CodeType, FrameType
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["Reads", "user_line", "watching"]

_LIBRARY_DIRS = tuple(
    os.path.dirname(m.__file__ or "") + os.sep
    for m in (torch, __import__("pyro"), __import__("pyro_dropout"))
)
_THIRD_PARTY_DIRS = tuple({sysconfig.get_paths()[k] + os.sep for k in ("purelib", "platlib")})
_STDLIB_DIRS = tuple({sysconfig.get_paths()[k] + os.sep for k in ("stdlib", "platstdlib")})
_LIBRARY, _STDLIB, _THIRD_PARTY, _USER = 0, 1, 2, 3
_PURE_BUILTINS = frozenset(
    "abs all any ascii bin callable chr divmod format getattr hasattr hash hex id isinstance issubclass "
    "iter len max min next oct ord pow repr round sorted sum".split()
)
_PURE_MODULES = frozenset(
    "math cmath operator _operator itertools functools _functools numbers torch numpy _abc abc".split()
)
_CONTAINERS = (list, dict, set, tuple, str, bytes, frozenset, int, float, bool, complex)
_MUTATORS = frozenset(
    "append extend insert pop remove clear update setdefault popitem add discard sort reverse "
    "__setitem__ __delitem__ __iadd__ difference_update intersection_update".split()
)
_TENSOR_READS = frozenset({"tolist", "numpy", "item", "__array__", "__index__", "__int__", "__float__"})


@functools.lru_cache(maxsize=512)
def _kind(filename: str) -> int:
    if filename.startswith(_LIBRARY_DIRS):
        return _LIBRARY
    if filename.startswith(_THIRD_PARTY_DIRS):
        return _THIRD_PARTY
    if filename.startswith(("<stdin>", "<console>", "<ipython-input")):
        return _USER  # typed in
    if filename.startswith(_STDLIB_DIRS) or filename.startswith("<"):
        return _STDLIB  # "<string>" and the like: code made by exec (a dataclass's __init__), its caller's
    return _USER


def _module_method(frame: FrameType) -> bool:
    """Whether a frame runs a method of an ``nn.Module`` (its first argument one)."""
    code = frame.f_code
    return code.co_argcount > 0 and isinstance(frame.f_locals.get(code.co_varnames[0]), torch.nn.Module)


def user_line() -> str:
    """The innermost frame of the user's code on the stack, as "file:line (code)"."""
    frames = traceback.extract_stack()[:-1]
    mine = [f for f in frames if _kind(f.filename) >= _THIRD_PARTY]
    if not mine:
        return "a line outside the user's code"
    return f"{mine[-1].filename}:{mine[-1].lineno} ({(mine[-1].line or '').strip()})"


def _where(code: CodeType, line: int | None) -> str:
    return f"{code.co_filename}:{line or code.co_firstlineno}"


@functools.lru_cache(maxsize=4096)
def _static_reads(code: CodeType) -> tuple[frozenset, frozenset, frozenset, str]:
    """From a code object's instructions: the global names it loads, the attribute chains it follows
    from them, the modules it imports, and its first write a replay would skip ("" for none)."""
    names, chains, imports, write = set(), set(), set(), ""
    ins = list(dis.get_instructions(code))
    outer = set(code.co_freevars)

    def outside(i: int) -> bool:  # the instruction loads a global or a closure variable
        return i >= 0 and (
            ins[i].opname == "LOAD_GLOBAL" or (ins[i].opname == "LOAD_DEREF" and ins[i].argval in outer)
        )

    for i, op in enumerate(ins):
        if op.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
            names.add(op.argval)
            j = i + 1
            while j < len(ins) and ins[j].opname in ("LOAD_ATTR", "LOAD_METHOD"):
                j += 1
            chains.add((op.argval, *(x.argval for x in ins[i + 1 : j])))
        elif op.opname == "IMPORT_NAME":
            imports.add(op.argval)
        line = op.positions.lineno if op.positions else None
        if write:
            continue
        if op.opname in ("STORE_GLOBAL", "DELETE_GLOBAL"):
            write = f"assigns the global {op.argval} at {_where(code, line)}"
        elif op.opname in ("STORE_DEREF", "DELETE_DEREF") and op.argval in outer:
            write = f"assigns the closure variable {op.argval} at {_where(code, line)}"
        elif (op.opname in ("STORE_ATTR", "DELETE_ATTR") and outside(i - 1)) or (
            op.opname in ("STORE_SUBSCR", "DELETE_SUBSCR") and outside(i - 2)
        ):
            write = f"writes into a global or closure variable at {_where(code, line)}"
    return frozenset(names), frozenset(chains), frozenset(imports), write


class Reads:
    """What a watched run read: ``globals``, by the id of each global namespace, the namespace, the
    names loaded and the attribute chains followed; ``codes``, the code objects run that have closure
    variables; ``imports``, the modules imported; ``mutated``, the containers whose contents the
    user's code changed (with where); ``refused``, why no guard can cover the run ("" where one can)."""

    def __init__(self) -> None:
        self.globals: dict[int, tuple[dict, set[str], set[tuple[str, ...]]]] = {}
        self.codes: set[CodeType] = set()
        self.imports: set[str] = set()
        self.mutated: list[tuple[Any, str]] = []
        self.refused = ""
        self._frames: set[FrameType] = set()

    def refuse(self, why: str) -> None:
        self.refused = self.refused or why

    def profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            kind = _kind(frame.f_code.co_filename)
            if (
                kind == _USER
                or (kind != _LIBRARY and frame.f_back in self._frames)
                or (kind == _THIRD_PARTY and _module_method(frame))
            ):
                self._frames.add(frame)
                self._code(frame)
        elif event == "return":
            self._frames.discard(frame)
        elif event == "c_call" and frame in self._frames:
            self._c_call(frame, arg)

    def _code(self, frame: FrameType) -> None:
        code = frame.f_code
        names, chains, imports, write = _static_reads(code)
        if write:
            self.refuse(f"the code {write}")
        space = frame.f_globals
        entry = self.globals.setdefault(id(space), (space, set(), set()))
        entry[1].update(names)
        entry[2].update(chains)
        self.imports.update(imports)
        if code.co_freevars:
            self.codes.add(code)

    def _c_call(self, frame: FrameType, fn: Any) -> None:
        owner, name = getattr(fn, "__self__", None), getattr(fn, "__name__", "")
        where = _where(frame.f_code, frame.f_lineno)
        if isinstance(owner, torch.Tensor):
            if name in _TENSOR_READS:
                self.refuse(f"the code reads a tensor's value into Python ({name}) at {where}")
            return
        if isinstance(owner, type) and owner.__module__ == "builtins":
            return  # a builtin type's own constructor (tuple.__new__ of a named tuple, dict.fromkeys)
        if type(owner) in _CONTAINERS:
            if name in _MUTATORS:
                self.mutated.append((owner, f"{type(owner).__name__}.{name} at {where}"))
            return
        module = getattr(fn, "__module__", None) or getattr(type(owner), "__module__", None) or ""
        if owner is builtins or module == "builtins":
            if name in _PURE_BUILTINS:
                return
        elif module.partition(".")[0] in _PURE_MODULES and not module.startswith("numpy.random"):
            return
        label = (module + "." if module else "") + (getattr(fn, "__qualname__", name) or repr(fn))
        self.refuse(f"the code calls {label} at {where}, whose result no guard can foresee")


def _depends_on_values(func: Any, args: tuple) -> bool:
    tags = func.tags
    if torch.Tag.data_dependent_output in tags:
        return True
    if torch.Tag.dynamic_output_shape not in tags:
        return False
    if func is torch.ops.aten.index.Tensor:  # only a boolean mask makes its shape depend on values
        indices = args[1] if len(args) > 1 else ()
        return any(isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8) for i in indices)
    return True


class _DataDependence(TorchDispatchMode):
    """Within the mode, ``first`` says where an operation first read a tensor's value into Python, or
    gave a shape that depends on values (None: nowhere)."""

    def __init__(self) -> None:
        super().__init__()
        self.first: str | None = None

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: Any = None) -> Any:
        if self.first is None and _depends_on_values(func, args):
            self.first = f"{func.overloadpacket.__name__} at {user_line()}"
        return func(*args, **(kwargs or {}))


def _numpy_state() -> Any:
    """NumPy's global generator's state, comparable with ``==`` (None without NumPy)."""
    numpy = sys.modules.get("numpy")
    if numpy is None:
        return None
    state = numpy.random.get_state(legacy=False)
    inner = state["state"]
    return state["bit_generator"], inner["key"].tobytes(), inner["pos"], state["has_gauss"], state["gauss"]


@contextmanager
def watching() -> Iterator[Reads]:
    """Run the block watched (see the module's docs); the :class:`Reads` it yields is filled when the
    block ends."""
    reads = Reads()
    if sys.getprofile() is not None:
        reads.refuse("a profiler is active (sys.setprofile), and the recording needs that hook")
        yield reads
        return
    python, numpy = random.getstate(), _numpy_state()
    data = _DataDependence()
    sys.setprofile(reads.profile)
    try:
        with data:
            yield reads
    finally:
        sys.setprofile(None)
    if data.first is not None:
        reads.refuse(
            f"the code reads a tensor's value into Python, or makes a shape from values: {data.first}"
        )
    if random.getstate() != python:
        reads.refuse("the code draws from Python's random module, which a recorded graph would freeze")
    if _numpy_state() != numpy:
        reads.refuse("the code draws from NumPy's global generator, which a recorded graph would freeze")
