"""The methods of the OOD comparison, each a training that gives the sampled class probabilities
of one or more methods; one explicit tuple is their order (the command line's, the tables')."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..data import ImageSplits
from ..probs import Probs
from ..settings import MnistSettings
from .concrete import fit_concrete
from .ensemble import fit_ensemble
from .mc_dropout import MC_DROPOUT_METHODS, fit_mc_dropout

__all__ = ["METHODS", "TRAININGS", "Training", "training_of"]

Fit = Callable[[ImageSplits, MnistSettings, bool], tuple[dict[str, Probs], dict[str, Any]]]


@dataclass(frozen=True)
class Training:
    """One training (``fit``) and the methods whose probabilities it returns."""

    fit: Fit
    methods: tuple[str, ...]


TRAININGS: tuple[Training, ...] = (
    Training(fit_mc_dropout, MC_DROPOUT_METHODS),
    Training(fit_concrete, ("concrete",)),
    Training(fit_ensemble, ("ensemble",)),
)
METHODS = tuple(m for t in TRAININGS for m in t.methods)


def training_of(name: str) -> Training:
    """The training that scores the method ``name``."""
    found = [t for t in TRAININGS if name in t.methods]
    if not found:
        raise ValueError(f"unknown method {name!r}; known: {', '.join(METHODS)}")
    return found[0]
