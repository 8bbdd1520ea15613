"""Summaries of UCI results: mean and standard error per data set and method, the precision a
cell is given to, wall times, and the verdict against a published figure."""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from .labels import label_of, table_order
from .published import PUBLISHED_DECIMALS

__all__ = [
    "cell",
    "decimals_for",
    "groups_of_splits",
    "mean_se",
    "methods_in",
    "ran_on_gpu",
    "split_cell",
    "split_ranges",
    "splits_and_time",
    "summarise",
    "verdict",
    "wall_time",
]


def mean_se(values: list[float]) -> tuple[float, float]:
    """The mean of ``values`` and its standard error (NaN for a single value)."""
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, float("nan")
    var = sum((v - mean) ** 2 for v in values) / (n - 1)
    return mean, math.sqrt(var / n)


def summarise(rows: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """``(dataset, label) -> {rmse: (mean, se), test_ll: ..., splits, seconds}``; the label is
    the method, with ``-per-draw`` appended for dropout runs trained with one mask per draw."""
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for row in rows:
        groups[(row["dataset"], label_of(row))].append(row)
    out = {}
    for key, group in groups.items():
        std = [r["rmse_standard"] for r in group if r.get("rmse_standard") is not None]
        split_groups = groups_of_splits(group)
        out[key] = {
            "rmse": mean_se([r["rmse"] for r in group]),
            "rmse_standard": mean_se(std) if len(std) == len(group) else None,
            "test_ll": mean_se([r["test_ll"] for r in group]),
            "splits": len(group),
            "protocol_seconds": sum(g["seconds"] for g in split_groups),
            "gpu_splits": sum(ran_on_gpu(r) for r in group),
            "groups": split_groups,
        }
    return out


def groups_of_splits(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The groups of splits among one label's result rows that trained together, in split order:
    each group's rows share one protocol wall time (``protocol_seconds``), of which
    ``resumed_seconds`` were trained by an earlier process whose checkpoint this one resumed."""
    by_time: dict[float, list[dict]] = defaultdict(list)
    for row in rows:
        by_time[row.get("protocol_seconds", 0.0)].append(row)
    groups = [
        {
            "splits": sorted(r.get("split", -1) for r in together),
            "seconds": seconds,
            "resumed_seconds": max(r.get("resumed_training_seconds") or 0.0 for r in together),
        }
        for seconds, together in by_time.items()
    ]
    return sorted(groups, key=lambda g: g["splits"])


def methods_in(summary: dict[tuple[str, str], Any]) -> list[str]:
    """The methods present in a :func:`summarise` result: the usual order, then any others."""
    present = {m for _, m in summary}
    order = table_order()
    return [m for m in order if m in present] + sorted(present - set(order))


def split_ranges(splits: list[int]) -> str:
    """``[0, 1, 2, 5, 7, 8]`` -> ``"0-2, 5, 7-8"``."""
    parts: list[list[int]] = []
    for s in sorted(splits):
        if parts and s == parts[-1][-1] + 1:
            parts[-1].append(s)
        else:
            parts.append([s])
    return ", ".join(str(p[0]) if len(p) == 1 else f"{p[0]}-{p[-1]}" for p in parts)


def cell(value: tuple[float, float] | None, digits: int = 2) -> str:
    if value is None:
        return "—"
    mean, se = value
    return f"{mean:.{digits}f} ± {se:.{digits}f}" if math.isfinite(se) else f"{mean:.{digits}f}"


def split_cell(s: dict[str, Any] | None, metric: str, digits: int, full: int) -> str:
    """A method's cell; one averaging fewer splits than the data set's fullest column says how
    many, e.g. ``1.14 ± 0.02 (3/20)``, so that a partial run is not read as a finished one."""
    if s is None:
        return "—"
    text = cell(s[metric], digits)
    return text if s["splits"] >= full else f"{text} ({s['splits']}/{full})"


def decimals_for(summary: dict[tuple[str, str], Any], dataset: str, metric: str) -> int:
    """Decimals for one data set's ``metric`` in every table: enough to show the smallest
    standard error among all its runs to one significant figure (two to five decimals), so
    that a mean is given to the precision of its error. Naval's RMSE, about 0.0007 ± 0.00003, then reads
    0.00071 ± 0.00003 rather than 0.001 ± 0.000 beside a 0.000 ± 0.000 that hides 0.0004.
    With no positive standard error (one split, or equal values), the smallest mean gets two
    significant figures instead."""
    values = [s[metric] for (d, _), s in summary.items() if d == dataset and s[metric] is not None]
    errors = [se for _, se in values if math.isfinite(se) and se > 0]
    means = [abs(mean) for mean, _ in values if mean != 0 and math.isfinite(mean)]
    if errors:
        decimals = -math.floor(math.log10(min(errors)))
    elif means:
        decimals = 1 - math.floor(math.log10(min(means)))
    else:
        decimals = 2
    return min(5, max(2, decimals))


def verdict(ours: dict[str, Any], published: tuple[float, float, float, float]) -> str:
    """Matches or beats within one standard error (of our mean) on RMSE and on test LL.

    A published figure stands for every value that rounds to it (0.00 is anything below
    0.005), so the comparison also allows half a unit of its last digit.
    """
    (rmse, rmse_se), (ll, ll_se) = ours["rmse"], ours["test_ll"]
    half = 0.5 * 10**-PUBLISHED_DECIMALS
    rmse_ok = rmse <= published[0] + half + (rmse_se if math.isfinite(rmse_se) else 0.0)
    ll_ok = ll >= published[2] - half - (ll_se if math.isfinite(ll_se) else 0.0)
    return ("RMSE ✓" if rmse_ok else "RMSE ✗") + ", " + ("LL ✓" if ll_ok else "LL ✗")


def ran_on_gpu(row: dict[str, Any]) -> bool:
    return str(row.get("settings", {}).get("device", "cpu")).startswith("cuda")


def wall_time(s: dict[str, Any]) -> str:
    """The protocol's wall time in minutes, marked where the runs were on a GPU."""
    cell = f"{s['protocol_seconds'] / 60:.1f} min"
    gpu = s.get("gpu_splits", 0)
    if not gpu:
        return cell
    return cell + (" (GPU)" if gpu == s["splits"] else f" ({gpu} split{'s' * (gpu > 1)} on a GPU)")


def splits_and_time(s: dict[str, Any] | None) -> str:
    return "—" if s is None else f"{s['splits']} · {wall_time(s)}"
