"""Which methods head the UCI tables (the comparison a reader comes for) and which are variants,
and which cells are the best within one standard error."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["HEADLINE", "best_within_one_se", "split_methods"]

# the protocol's own runs of each method (one mask per example, the network retrained on all
# the training rows, one hidden layer): every other label is a variant
HEADLINE = ("mc-dropout", "concrete", "bbalpha-0.5", "bbalpha-1", "mfvi", "ensemble", "sgp", "hmc")


def split_methods(methods: list[str]) -> tuple[list[str], list[str]]:
    """``(headline, variants)``: the headline labels in :data:`HEADLINE`'s order, the rest as given."""
    headline = [m for m in HEADLINE if m in methods]
    return headline, [m for m in methods if m not in headline]


def best_within_one_se(
    summary: dict[tuple[str, str], Any], dataset: str, methods: list[str], metric: str, full: int
) -> set[str]:
    """The methods of ``dataset`` whose mean lies within its own standard error of the best
    mean (lowest RMSE, highest log-likelihood), among the runs of all ``full`` splits."""
    found = {}
    for m in methods:
        s = summary.get((dataset, m))
        if s is None or s["splits"] < full or s[metric] is None or not math.isfinite(s[metric][0]):
            continue
        mean, se = s[metric]
        found[m] = (mean, se if math.isfinite(se) else 0.0)
    if not found:
        return set()
    if metric == "rmse":
        best = min(mean for mean, _ in found.values())
        return {m for m, (mean, se) in found.items() if mean - se <= best}
    best = max(mean for mean, _ in found.values())
    return {m for m, (mean, se) in found.items() if mean + se >= best}
