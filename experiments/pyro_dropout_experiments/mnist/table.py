"""Markdown tables of an OOD comparison's ``results.json``."""

from __future__ import annotations

from typing import Any

from .scores import SCORES

__all__ = ["ood_tables"]

_SHORT = {
    "predictive_entropy": "entropy",
    "mutual_information": "MI",
    "variation_ratio": "var. ratio",
    "max_softmax": "max softmax",
}


def _row(cells: list[Any]) -> str:
    return "| " + " | ".join(cells) + " |"


def _number(value: Any, digits: int = 4) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def ood_tables(results: dict[str, Any]) -> str:
    """Three tables: calibration per method, OOD AUROC per set and score, misclassification AUROC."""
    methods = results["methods"]
    lines = [
        _row(
            ["method", "accuracy", "NLL", "Brier", "ECE", "adaptive ECE", "classwise ECE", "AURC", "train s"]
        )
    ]
    lines.append(_row(["---"] + ["---:"] * 8))
    for name, m in methods.items():
        cells = [m[k] for k in ("accuracy", "nll", "brier", "ece", "adaptive_ece", "classwise_ece", "aurc")]
        lines.append(_row([name, *map(_number, cells), f"{m['train_seconds']:.0f}"]))
    sets = sorted({s for m in methods.values() for s in m["auroc"]})
    header = [f"{s}: {_SHORT[k]}" for s in sets for k in SCORES]
    lines += ["", _row(["OOD AUROC", *header]), _row(["---"] + ["---:"] * len(header))]
    for name, m in methods.items():
        lines.append(_row([name, *(_number(m["auroc"][s][k], 3) for s in sets for k in SCORES)]))
    lines += [
        "",
        _row(["misclassification AUROC", *(_SHORT[k] for k in SCORES)]),
        _row(["---"] + ["---:"] * 4),
    ]
    for name, m in methods.items():
        lines.append(_row([name, *(_number(m["misclassification_auroc"][k], 3) for k in SCORES)]))
    return "\n".join(lines)
