r"""A ``Protocol``: the stages the UCI benchmark runs a method through, split by split.

``validate`` (fit each candidate on the fitting rows, score it on the validation rows) →
``select`` (the best candidate per split; a NaN score is never chosen) → ``final`` (fit the
chosen candidate and score it on the test rows). The benchmark subclasses :class:`Protocol`
and fills in the stages; :meth:`Protocol.run` keeps the order, the resume and the records.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from .method import Method

__all__ = ["Protocol", "select_best"]


def select_best(rows: Sequence[dict[str, Any]], score: str = "test_ll", where: str = "") -> dict[str, Any]:
    """The row with the highest finite ``score``; an error naming ``where`` if none is finite."""
    finite = [r for r in rows if isinstance(r.get(score), int | float) and math.isfinite(r[score])]
    if not finite:
        raise ValueError(
            f"{where or 'the grid search'}: no candidate has a finite validation {score} "
            f"({[r.get(score) for r in rows]}); training diverged on every grid point"
        )
    return max(finite, key=lambda r: r[score])


class Protocol:
    """Base class of an experiment's protocol for one ``method``; ``log`` receives progress lines."""

    def __init__(self, method: Method, log: Callable[[str], None] = print) -> None:
        self.method = method
        self.log = log

    def validate(self, splits: list[int]) -> dict[int, list[dict[str, Any]]]:
        """Per split, one row per candidate: its hyper-parameters and validation scores."""
        raise NotImplementedError

    def select(self, split: int, rows: list[dict[str, Any]]) -> dict[str, Any]:
        """The chosen candidate of ``split``: by default the best validation log-likelihood."""
        return select_best(rows, where=f"split {split}")

    def final(self, splits: list[int], chosen: dict[int, dict[str, Any]]) -> dict[int, dict[str, Any]]:
        """Fit each split's chosen candidate and score it on the test rows."""
        raise NotImplementedError

    def run_stages(self, splits: list[int]) -> dict[int, dict[str, Any]]:
        """validate → select → final for ``splits``; a method with no grid skips to ``final``."""
        rows = self.validate(splits) if splits else {}
        best = {i: self.select(i, rows[i]) for i in splits if rows.get(i)}
        return self.final(splits, best)
