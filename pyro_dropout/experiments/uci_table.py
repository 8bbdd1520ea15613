"""The UCI results table: every method and data set next to the published MC-dropout numbers."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

__all__ = ["PUBLISHED", "collect", "markdown_table", "summarise"]

# (RMSE, its standard error, test log-likelihood, its standard error)
PUBLISHED: dict[str, dict[str, tuple[float, float, float, float]]] = {
    "Gal & Ghahramani 2016, Table 1": {
        "bostonHousing": (2.97, 0.85, -2.46, 0.25),
        "concrete": (5.23, 0.53, -3.04, 0.09),
        "kin8nm": (0.10, 0.00, 0.95, 0.03),
        "naval-propulsion-plant": (0.01, 0.00, 3.80, 0.05),
        "power-plant": (4.02, 0.18, -2.80, 0.05),
        "protein-tertiary-structure": (4.36, 0.04, -2.89, 0.01),
        "wine-quality-red": (0.62, 0.04, -0.93, 0.06),
    },
    "MC dropout, 2018 grid-search re-run": {
        "bostonHousing": (2.90, 0.18, -2.40, 0.04),
        "concrete": (4.82, 0.16, -2.93, 0.02),
        "kin8nm": (0.08, 0.00, 1.14, 0.01),
        "naval-propulsion-plant": (0.00, 0.00, 4.45, 0.00),
        "power-plant": (4.01, 0.04, -2.80, 0.01),
        "protein-tertiary-structure": (4.27, 0.02, -2.87, 0.00),
        "wine-quality-red": (0.62, 0.01, -0.93, 0.01),
    },
}
REFERENCE = "MC dropout, 2018 grid-search re-run"
ORDER = ("mc-dropout", "concrete", "bbalpha-0.5", "bbalpha-1", "mfvi", "ensemble", "sgp", "hmc")


def collect(results: Path) -> list[dict[str, Any]]:
    """Every per-split JSON file under ``results``."""
    if not results.is_dir():
        raise FileNotFoundError(
            f"no results folder {results}; run `pyro-dropout uci ... --out {results}` first"
        )
    return [json.loads(p.read_text()) for p in sorted(results.rglob("*.json"))]


def _mean_se(values: list[float]) -> tuple[float, float]:
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, float("nan")
    var = sum((v - mean) ** 2 for v in values) / (n - 1)
    return mean, math.sqrt(var / n)


def summarise(rows: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """``(dataset, method) -> {rmse: (mean, se), test_ll: ..., splits, seconds}``."""
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for row in rows:
        groups[(row["dataset"], row["method"])].append(row)
    out = {}
    for key, group in groups.items():
        std = [r["rmse_standard"] for r in group if r.get("rmse_standard") is not None]
        out[key] = {
            "rmse": _mean_se([r["rmse"] for r in group]),
            "rmse_standard": _mean_se(std) if len(std) == len(group) else None,
            "test_ll": _mean_se([r["test_ll"] for r in group]),
            "splits": len(group),
            "protocol_seconds": sum({r.get("protocol_seconds", 0.0) for r in group}),
        }
    return out


def _cell(value: tuple[float, float] | None, digits: int = 2) -> str:
    if value is None:
        return "—"
    mean, se = value
    return f"{mean:.{digits}f} ± {se:.{digits}f}" if math.isfinite(se) else f"{mean:.{digits}f}"


def _digits(dataset: str) -> int:
    return 3 if dataset in ("kin8nm", "naval-propulsion-plant") else 2


def _verdict(ours: dict[str, Any], published: tuple[float, float, float, float]) -> str:
    """Matches or beats within one standard error (of our mean) on RMSE and on test LL."""
    (rmse, rmse_se), (ll, ll_se) = ours["rmse"], ours["test_ll"]
    rmse_ok = rmse <= published[0] + (rmse_se if math.isfinite(rmse_se) else 0.0)
    ll_ok = ll >= published[2] - (ll_se if math.isfinite(ll_se) else 0.0)
    return ("RMSE ✓" if rmse_ok else "RMSE ✗") + ", " + ("LL ✓" if ll_ok else "LL ✗")


def markdown_table(rows: list[dict[str, Any]]) -> str:
    """Markdown tables of test RMSE and test log-likelihood (mean ± standard error over splits)."""
    summary = summarise(rows)
    datasets = sorted({d for d, _ in summary})
    methods = [m for m in ORDER if any((d, m) in summary for d in datasets)]
    methods += sorted({m for _, m in summary} - set(methods))
    lines = []
    for metric, title in (
        ("rmse", "Test RMSE (lower is better)"),
        ("test_ll", "Test log-likelihood (higher is better)"),
    ):
        index = 0 if metric == "rmse" else 2
        head = ["data set", *methods, *PUBLISHED]
        lines += [f"### {title}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for d in datasets:
            cells = [
                _cell(summary[(d, m)][metric], _digits(d)) if (d, m) in summary else "—" for m in methods
            ]
            pub = [
                _cell((p[d][index], p[d][index + 1]), _digits(d)) if d in p else "—"
                for p in PUBLISHED.values()
            ]
            lines.append("| " + " | ".join([d, *cells, *pub]) + " |")
        lines.append("")
    lines += [
        "### Standard dropout (weight averaging) RMSE and MC dropout against the 2018 re-run",
        "",
        "| data set | MC dropout RMSE | standard dropout RMSE | splits | protocol wall time "
        "| vs 2018 re-run |",
        "|---|---|---|---|---|---|",
    ]
    for d in datasets:
        if (d, "mc-dropout") not in summary:
            continue
        s = summary[(d, "mc-dropout")]
        verdict = _verdict(s, PUBLISHED[REFERENCE][d]) if d in PUBLISHED[REFERENCE] else "—"
        lines.append(
            f"| {d} | {_cell(s['rmse'], _digits(d))} | {_cell(s['rmse_standard'], _digits(d))} | "
            f"{s['splits']} | {s['protocol_seconds'] / 60:.1f} min | {verdict} |"
        )
    lines += [
        "",
        "### Splits run and wall time of the whole protocol (grid search included)",
        "",
        "| data set | " + " | ".join(methods) + " |",
        "|" + "---|" * (len(methods) + 1),
    ]
    for d in datasets:
        cells = [
            f"{summary[(d, m)]['splits']} · {summary[(d, m)]['protocol_seconds'] / 60:.1f} min"
            if (d, m) in summary
            else "—"
            for m in methods
        ]
        lines.append("| " + " | ".join([d, *cells]) + " |")
    return "\n".join(lines) + "\n"
