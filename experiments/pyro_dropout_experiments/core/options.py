r"""Options dataclasses are the one source of every setting's default, help and check.

A field's ``metadata`` may hold ``help`` (the command line's text), ``choices``, ``positive``
(a number that must be > 0), ``minimum`` and ``maximum``. :func:`add_flags` turns the fields into
``--prefix-field-name`` flags (values checked when parsed), :func:`from_args` reads them back,
and :func:`flatten` / :func:`unflatten` give the flat ``prefix_field`` keys a result file stores.
"""

from __future__ import annotations

import argparse
import math
import types
import typing
from collections.abc import Callable
from dataclasses import MISSING, Field, fields, replace
from typing import Any, TypeVar

__all__ = [
    "add_flags",
    "check_field",
    "flag_name",
    "flatten",
    "from_args",
    "known_names",
    "unflatten",
    "unless_given",
    "validate",
]

T = TypeVar("T")


def _key(prefix: str, name: str) -> str:
    return f"{prefix}_{name}" if prefix else name


def flag_name(prefix: str, name: str) -> str:
    """``("concrete", "tau_init")`` -> ``--concrete-tau-init``."""
    return "--" + _key(prefix, name).replace("_", "-")


def _field_type(cls: type, f: Field) -> Any:
    return typing.get_type_hints(cls)[f.name]


def check_field(f: Field, value: Any, where: str) -> None:
    """Raise a ``ValueError`` naming ``where`` if ``value`` breaks the field's metadata."""
    meta = f.metadata
    choices = meta.get("choices")
    if choices is not None and value not in choices:
        raise ValueError(f"{where} must be one of {', '.join(map(str, choices))}, got {value!r}")
    numbers = value if isinstance(value, tuple) else (value,)
    for v in numbers:
        if not isinstance(v, int | float) or isinstance(v, bool) or v is None:
            continue
        if not math.isfinite(v):
            raise ValueError(f"{where} must be finite, got {v!r}")
        if meta.get("positive") and not v > 0:
            raise ValueError(f"{where} must be positive, got {v!r}")
        if "minimum" in meta and v < meta["minimum"]:
            raise ValueError(f"{where} must be at least {meta['minimum']}, got {v!r}")
        if "maximum" in meta and v > meta["maximum"]:
            raise ValueError(f"{where} must be at most {meta['maximum']}, got {v!r}")
        if "below" in meta and not v < meta["below"]:
            raise ValueError(f"{where} must be below {meta['below']}, got {v!r}")


def _parser_for(cls: type, f: Field, flag: str) -> Any:
    kind = _field_type(cls, f)
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    union = origin is typing.Union or origin is types.UnionType
    base = next((a for a in args if a is not type(None)), kind) if union else kind
    if typing.get_origin(base) is tuple:
        base = (typing.get_args(base) or (float,))[0]
        many = True
    else:
        many = False

    def parse(text: str) -> Any:
        try:
            items = [base(v) for v in text.split(",")] if many else base(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag} takes {base.__name__} values, got {text!r}") from None
        value = tuple(items) if many else items
        try:
            check_field(f, value, flag)
            if "parse_check" in f.metadata:  # checks that belong to the command line only
                f.metadata["parse_check"](value, flag)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
        return value

    return parse


def add_flags(
    parser: Any,  # a parser or an argument group
    cls: type,
    prefix: str = "",
    skip: tuple = (),
    defaults: dict[str, Any] | None = None,
) -> None:
    """One flag per field of dataclass ``cls`` (booleans: ``--flag``/``--no-flag``); ``defaults``
    replaces a field's default for this command (shown in its help). A help text that states its
    default itself (``"(default: all)"``) is not given a second one."""
    for f in fields(cls):
        if f.name in skip or f.metadata.get("flag") is False:
            continue
        flag = flag_name(prefix, f.name)
        factory: Any = f.default_factory
        default = f.default if f.default is not MISSING else factory()
        default = (defaults or {}).get(f.name, default)
        text = f.metadata.get("help", "")
        shown = ",".join(map(str, default)) if isinstance(default, tuple) else default
        help_text = text if "default" in text else f"{text} (default {shown})" if text else f"default {shown}"
        dest = _key(prefix, f.name)
        if isinstance(default, bool):
            parser.add_argument(
                flag, dest=dest, default=default, action=argparse.BooleanOptionalAction, help=help_text
            )
        else:
            parse = _parser_for(cls, f, flag)
            parser.add_argument(flag, dest=dest, type=parse, default=default, help=help_text)


def unless_given(settings: T, *changes: dict[str, Any], given: set[str]) -> T:
    """``settings`` (an options dataclass made by :func:`from_args`) with ``changes`` applied in
    order, the later winning, to the fields not in ``given`` (the flags written on the command
    line, whatever their values). Keys that are not fields are skipped, so one dict of quick
    values may serve two classes."""
    out: Any = settings
    names = {f.name for f in fields(out)}
    for change in changes:
        out = replace(out, **{k: v for k, v in change.items() if k in names and k not in given})
    return out


def from_args(cls: type[T], args: argparse.Namespace, prefix: str = "", **fixed: Any) -> T:
    """The dataclass ``cls`` from the flags :func:`add_flags` made (``fixed``: fields set here)."""
    known: Any = cls
    values = {
        f.name: getattr(args, _key(prefix, f.name))
        for f in fields(known)
        if hasattr(args, _key(prefix, f.name))
    }
    return cls(**{**values, **fixed})


def flatten(options: Any, prefix: str = "") -> dict[str, Any]:
    """``{prefix_field: value}`` of a dataclass instance (tuples as lists, as JSON has them)."""
    return {
        _key(prefix, f.name): list(v) if isinstance(v := getattr(options, f.name), tuple) else v
        for f in fields(options)
    }


def unflatten(cls: type[T], flat: dict[str, Any], prefix: str = "", legacy: dict | None = None) -> T:
    """The dataclass ``cls`` from stored flat keys; a missing key takes ``legacy``'s value
    (what runs made before the setting existed did), else the default. Unknown keys are ignored."""
    values: dict[str, Any] = {}
    known: Any = cls
    for f in fields(known):
        key = _key(prefix, f.name)
        if key in flat:
            value = flat[key]
        elif legacy is not None and key in legacy:
            value = legacy[key]
        else:
            continue
        values[f.name] = tuple(value) if isinstance(value, list) else value
    return cls(**values)


def validate(options: Any, prefix: str = "") -> None:
    """Check every field of a dataclass instance against its type and metadata: an error naming
    the field and its flag, e.g. ``hidden_layers (--hidden-layers) must be at least 1, got 0``."""
    hints = typing.get_type_hints(type(options))
    for f in fields(options):
        value, where = getattr(options, f.name), f"{f.name} ({flag_name(prefix, f.name)})"
        hint = hints[f.name]
        kind = hint.__name__ if isinstance(hint, type) else str(hint)
        if value is None and "None" in kind:
            continue
        items = value if isinstance(value, tuple) else (value,)
        whole = kind.startswith("int") or "tuple[int" in kind
        number = whole or kind.startswith("float") or "tuple[float" in kind
        if whole and any(isinstance(v, bool) or not isinstance(v, int) for v in items):
            raise ValueError(f"{where} must be a whole number, got {value!r}")
        if number and any(isinstance(v, bool) or not isinstance(v, int | float) for v in items):
            raise ValueError(f"{where} must be a number, got {value!r}")
        check_field(f, value, where)


def known_names(choices: tuple[str, ...], what: str) -> Callable[[tuple[str, ...], str], None]:
    """A field's ``parse_check`` for a tuple of names: at least one, each one of ``choices``
    (``what`` names them in the error, e.g. ``"policies"``)."""

    def check(names: tuple[str, ...], flag: str) -> None:
        unknown = [n for n in names if n not in choices]
        if unknown or not names:
            raise ValueError(f"{flag}: unknown {what} {unknown}; choose from {', '.join(choices)}")
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"{flag}: {what} {twice} named more than once (each runs once)")

    return check
