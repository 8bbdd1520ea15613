"""The UCI methods by name: one explicit tuple, the one source of their order (the command
line's choices, the tables' columns) and summaries.

A built-in method is one file in `pyro_dropout_experiments.uci.methods` plus one line in
`BUILT_IN`; its module is imported only when the method is asked for, so listing the names
(`pyro-dropout --help`) imports no method. A plugin or a test adds its own class with
`register` and removes it with `unregister`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .method import Method

__all__ = ["BUILT_IN", "MethodEntry", "get_method", "method_class", "method_names", "register", "unregister"]


@dataclass(frozen=True)
class MethodEntry:
    """A registered name: where its class lives (``module:Class``, relative to
    `pyro_dropout_experiments.uci.methods`, or a class itself), its one-line summary and the
    settings the name fixes (BB-α's alpha)."""

    name: str
    where: str | type[Method]
    summary: str
    presets: dict[str, Any] = field(default_factory=dict)

    def load(self) -> type[Method]:
        if not isinstance(self.where, str):
            return self.where
        module, _, cls = self.where.partition(":")
        return getattr(importlib.import_module(f"{__package__}.methods.{module}"), cls)


BUILT_IN: tuple[MethodEntry, ...] = (
    MethodEntry(
        "mc-dropout",
        "mc_dropout:MCDropout",
        "MC dropout: p and tau chosen on the validation rows (paper 000)",
    ),
    MethodEntry(
        "concrete",
        "concrete:ConcreteDropoutMethod",
        "Concrete dropout: p learned per layer, l on the validation rows (paper 001)",
    ),
    MethodEntry(
        "bbalpha-0.5", "bbalpha:BBAlphaDropout", "BB-alpha dropout, alpha = 0.5 (paper 003)", {"alpha": 0.5}
    ),
    MethodEntry(
        "bbalpha-1", "bbalpha:BBAlphaDropout", "BB-alpha dropout, alpha = 1 (paper 003)", {"alpha": 1.0}
    ),
    MethodEntry("mfvi", "mfvi:MeanFieldVI", "mean-field Gaussian VI, tau chosen on the validation rows"),
    MethodEntry(
        "ensemble",
        "ensemble:DeepEnsembleMethod",
        "a deep ensemble of 5 mean-variance networks, epochs chosen on validation",
    ),
    MethodEntry(
        "sgp",
        "sgp:SparseGPMethod",
        "a sparse GP (VFE), inducing points and kernel fitted on the training rows",
    ),
    MethodEntry("hmc", "hmc:HMCMethod", "HMC (NUTS) on the same network, tau with a Gamma prior"),
    MethodEntry(
        "nn-p0", "nn_p0:NoDropout", "the same network with p = 0: MAP, tau chosen on the validation rows"
    ),
)

_ADDED: dict[str, MethodEntry] = {}


def _entries() -> dict[str, MethodEntry]:
    return {**{e.name: e for e in BUILT_IN}, **_ADDED}


def register(name: str, summary: str = "", **presets: Any) -> Callable[[type[Method]], type[Method]]:
    """Add a :class:`Method` subclass under ``name`` (a plugin's or a test's own method), after the
    built-in ones; ``presets``: settings the name fixes."""

    def add(cls: type[Method]) -> type[Method]:
        if name in _entries():
            raise ValueError(f"a method named {name!r} is already registered")
        _ADDED[name] = MethodEntry(name, cls, summary or cls.summary, presets)
        return cls

    return add


def unregister(name: str) -> None:
    """Remove a method added with :func:`register` (the built-in ones stay)."""
    if name not in _ADDED:
        known = "built in" if name in _entries() else "registered"
        raise ValueError(
            f"no method named {name!r} was added with register() ({name!r} is not {known} there)"
        )
    del _ADDED[name]


def method_names() -> tuple[str, ...]:
    """Every method, built-in ones first in the order of `BUILT_IN`; imports none of them."""
    return tuple(_entries())


def method_class(name: str) -> tuple[type[Method], dict[str, Any]]:
    """The class of the method ``name`` (imported now) and its summary and presets."""
    entries = _entries()
    if name not in entries:
        from difflib import get_close_matches

        near = get_close_matches(name, list(entries), n=1)
        hint = f"; did you mean {near[0]!r}?" if near else ""
        raise ValueError(f"unknown method {name!r}{hint} (choose from {', '.join(entries)})")
    entry = entries[name]
    return entry.load(), {"summary": entry.summary, **entry.presets}


def get_method(name: str, options: Any = None) -> Method:
    """An instance of the method ``name``."""
    cls, presets = method_class(name)
    return cls(options, name=name, **{k: v for k, v in presets.items() if k != "summary"})
