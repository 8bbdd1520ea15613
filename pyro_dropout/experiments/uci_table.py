"""The UCI results table: every method and data set next to the published MC-dropout numbers."""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from pathlib import Path
from typing import Any, NamedTuple

from .uci_methods import Settings

__all__ = [
    "MASKED_METHODS",
    "PUBLISHED",
    "SOURCES",
    "Label",
    "collect",
    "is_result_file",
    "label",
    "markdown_table",
    "mean_se",
    "parse_label",
    "summarise",
]

# (RMSE, its standard error, test log-likelihood, its standard error)
PUBLISHED: dict[str, dict[str, tuple[float, float, float, float]]] = {
    "pub. MC dropout 2016": {
        "bostonHousing": (2.97, 0.85, -2.46, 0.25),
        "concrete": (5.23, 0.53, -3.04, 0.09),
        "kin8nm": (0.10, 0.00, 0.95, 0.03),
        "naval-propulsion-plant": (0.01, 0.00, 3.80, 0.05),
        "power-plant": (4.02, 0.18, -2.80, 0.05),
        "protein-tertiary-structure": (4.36, 0.04, -2.89, 0.01),
        "wine-quality-red": (0.62, 0.04, -0.93, 0.06),
    },
    "pub. VI 2016": {
        "bostonHousing": (4.32, 0.29, -2.90, 0.07),
        "concrete": (7.19, 0.12, -3.39, 0.02),
        "kin8nm": (0.10, 0.00, 0.90, 0.01),
        "naval-propulsion-plant": (0.01, 0.00, 3.73, 0.12),
        "power-plant": (4.33, 0.04, -2.89, 0.01),
        "protein-tertiary-structure": (4.84, 0.03, -2.99, 0.01),
        "wine-quality-red": (0.65, 0.01, -0.98, 0.01),
    },
    "pub. Concrete 2017": {
        "bostonHousing": (2.65, 0.17, -2.35, 0.05),
        "concrete": (4.46, 0.16, -3.12, 0.07),
        "kin8nm": (0.07, 0.00, 1.24, 0.00),
        "naval-propulsion-plant": (0.00, 0.00, 5.89, 0.05),
        "power-plant": (3.70, 0.04, -2.75, 0.01),
        "protein-tertiary-structure": (3.85, 0.02, -2.81, 0.00),
        "wine-quality-red": (0.62, 0.00, -0.94, 0.02),
    },
    "pub. MC dropout 2018": {
        "bostonHousing": (2.90, 0.18, -2.40, 0.04),
        "concrete": (4.82, 0.16, -2.93, 0.02),
        "kin8nm": (0.08, 0.00, 1.14, 0.01),
        "naval-propulsion-plant": (0.00, 0.00, 4.45, 0.00),
        "power-plant": (4.01, 0.04, -2.80, 0.01),
        "protein-tertiary-structure": (4.27, 0.02, -2.87, 0.00),
        "wine-quality-red": (0.62, 0.01, -0.93, 0.01),
    },
}
# paper 001's own MC-dropout baseline, on its two-hidden-layer network (Tables 3-4, "Dropout")
PUBLISHED_TWO_LAYERS: dict[str, tuple[float, float, float, float]] = {
    "bostonHousing": (2.80, 0.13, -2.34, 0.03),
    "concrete": (4.50, 0.18, -2.82, 0.02),
    "kin8nm": (0.08, 0.00, 1.10, 0.00),
    "naval-propulsion-plant": (0.00, 0.00, 4.32, 0.00),
    "power-plant": (3.63, 0.04, -2.67, 0.01),
    "protein-tertiary-structure": (3.62, 0.01, -2.70, 0.00),
    "wine-quality-red": (0.60, 0.01, -0.90, 0.01),
}
SOURCES = {
    "pub. MC dropout 2016": "MC dropout, Gal & Ghahramani 2016, Table 1",
    "pub. VI 2016": "mean-field VI (Graves 2011) as reported in Gal & Ghahramani 2016, Table 1",
    "pub. Concrete 2017": "Concrete dropout after the final M-step (CDropoutM), Gal, Hron & Kendall 2017, "
    "Tables 3-4 (two hidden layers of 50 units, §4.2; their own length-scales)",
    "pub. MC dropout 2018": "MC dropout, 2018 grid-search re-run with 10x epochs (the protocol run here)",
}
REFERENCE = "pub. MC dropout 2018"
# the methods that train with dropout masks, one per example (the default) or one per draw
MASKED_METHODS = ("mc-dropout", "concrete", "bbalpha-0.5", "bbalpha-1")
PER_DRAW = "-per-draw"  # the label suffix of their runs trained with one mask per function draw
LAYERS = "-layers"  # "-2-layers": the label suffix of runs with more than one hidden layer
GRID_SUFFIX = ".grid.json"  # a split's finished grid search, kept until its result is written
GRID_NETWORK = "-grid-network"  # the label suffix of runs scored with the grid network (Settings.retrain)
ORDER = (
    "mc-dropout",
    "mc-dropout" + PER_DRAW,
    "mc-dropout" + GRID_NETWORK,
    "concrete",
    "concrete" + PER_DRAW,
    "bbalpha-0.5",
    "bbalpha-0.5" + PER_DRAW,
    "bbalpha-1",
    "bbalpha-1" + PER_DRAW,
    "mfvi",
    "ensemble",
    "sgp",
    "hmc",
)


class Label(NamedTuple):
    """What a table label says about its runs (see :func:`label`)."""

    method: str
    per_example_masks: bool
    hidden_layers: int = 1
    retrain: bool = True


def label(method: str, per_example_masks: bool, hidden_layers: int = 1, retrain: bool = True) -> str:
    """The name a method's results go by: a dropout method trained with one mask per example
    (the protocol's default, as in the published code) is ``mc-dropout``; with one mask per
    function draw it is ``mc-dropout-per-draw``. Methods without dropout masks keep their name.
    A network with more than the protocol's one hidden layer adds ``-L-layers``
    (``concrete-2-layers``; the sparse GP has no layers), and the test score of the grid network
    that validation chose, instead of a retrained one, adds ``-grid-network``."""
    name = method + PER_DRAW if method in MASKED_METHODS and not per_example_masks else method
    if hidden_layers != 1 and method != "sgp":
        name += f"-{hidden_layers}{LAYERS}"
    return name if retrain else name + GRID_NETWORK


def parse_label(name: str) -> Label:
    """``(method, per_example_masks, hidden_layers, retrain)`` of a label made by :func:`label`."""
    retrain = not name.endswith(GRID_NETWORK)
    name = name.removesuffix(GRID_NETWORK)
    layers = 1
    match = re.fullmatch(rf"(.+)-(\d+){LAYERS}", name)
    if match:
        name, layers = match.group(1), int(match.group(2))
    if name.endswith(PER_DRAW) and name.removesuffix(PER_DRAW) in MASKED_METHODS:
        return Label(name.removesuffix(PER_DRAW), False, layers, retrain)
    return Label(name, True, layers, retrain)


def _label_of(row: dict[str, Any]) -> str:
    # settings a result file lacks take the values runs made before them had (LEGACY_SETTINGS)
    s = Settings.from_stored(row.get("settings", {}))
    return label(row["method"], s.per_example_masks, s.hidden_layers, s.retrain)


def is_result_file(path: Path) -> bool:
    """A per-split result, not a split's finished grid search waiting for its final model."""
    return path.suffix == ".json" and not path.name.endswith(GRID_SUFFIX)


def collect(results: Path) -> list[dict[str, Any]]:
    """Every per-split JSON file under ``results``."""
    if not results.is_dir():
        raise FileNotFoundError(
            f"no results folder {results}; run `pyro-dropout uci ... --out {results}` first"
        )
    files = sorted(f for f in results.rglob("*.json") if is_result_file(f))
    if not files:
        raise FileNotFoundError(
            f"no result files (*.json) under {results}; run `pyro-dropout uci ... --out {results}` first"
        )
    return [json.loads(p.read_text()) for p in files]


def methods_in(summary: dict[tuple[str, str], Any]) -> list[str]:
    """The methods present in a :func:`summarise` result: the usual order, then any others."""
    present = {m for _, m in summary}
    return [m for m in ORDER if m in present] + sorted(present - set(ORDER))


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
        groups[(row["dataset"], _label_of(row))].append(row)
    out = {}
    for key, group in groups.items():
        std = [r["rmse_standard"] for r in group if r.get("rmse_standard") is not None]
        split_groups = _groups_of_splits(group)
        out[key] = {
            "rmse": mean_se([r["rmse"] for r in group]),
            "rmse_standard": mean_se(std) if len(std) == len(group) else None,
            "test_ll": mean_se([r["test_ll"] for r in group]),
            "splits": len(group),
            "protocol_seconds": sum(g["seconds"] for g in split_groups),
            "gpu_splits": sum(_ran_on_gpu(r) for r in group),
            "groups": split_groups,
        }
    return out


def _groups_of_splits(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
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


def _split_ranges(splits: list[int]) -> str:
    """``[0, 1, 2, 5, 7, 8]`` -> ``"0-2, 5, 7-8"``."""
    parts: list[list[int]] = []
    for s in sorted(splits):
        if parts and s == parts[-1][-1] + 1:
            parts[-1].append(s)
        else:
            parts.append([s])
    return ", ".join(str(p[0]) if len(p) == 1 else f"{p[0]}-{p[-1]}" for p in parts)


def _cell(value: tuple[float, float] | None, digits: int = 2) -> str:
    if value is None:
        return "—"
    mean, se = value
    return f"{mean:.{digits}f} ± {se:.{digits}f}" if math.isfinite(se) else f"{mean:.{digits}f}"


def _split_cell(s: dict[str, Any] | None, metric: str, digits: int, full: int) -> str:
    """A method's cell; one averaging fewer splits than the data set's fullest column says how
    many, e.g. ``1.14 ± 0.02 (3/20)``, so that a partial run is not read as a finished one."""
    if s is None:
        return "—"
    cell = _cell(s[metric], digits)
    return cell if s["splits"] >= full else f"{cell} ({s['splits']}/{full})"


def _digits(summary: dict[tuple[str, str], Any], dataset: str, metric: str) -> int:
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


PUBLISHED_DECIMALS = 2  # every published figure above is rounded to two decimals


def _verdict(ours: dict[str, Any], published: tuple[float, float, float, float]) -> str:
    """Matches or beats within one standard error (of our mean) on RMSE and on test LL.

    A published figure stands for every value that rounds to it (0.00 is anything below
    0.005), so the comparison also allows half a unit of its last digit.
    """
    (rmse, rmse_se), (ll, ll_se) = ours["rmse"], ours["test_ll"]
    half = 0.5 * 10**-PUBLISHED_DECIMALS
    rmse_ok = rmse <= published[0] + half + (rmse_se if math.isfinite(rmse_se) else 0.0)
    ll_ok = ll >= published[2] - half - (ll_se if math.isfinite(ll_se) else 0.0)
    return ("RMSE ✓" if rmse_ok else "RMSE ✗") + ", " + ("LL ✓" if ll_ok else "LL ✗")


def markdown_table(rows: list[dict[str, Any]]) -> str:
    """Markdown tables of test RMSE and test log-likelihood (mean ± standard error over splits).

    Runs of the protocol's one-hidden-layer network fill the main tables; runs with more
    hidden layers (labels ``...-L-layers``) get their own table, next to paper 001's
    two-layer figures."""
    summary = summarise(rows)
    datasets = sorted({d for d, _ in summary})
    every = methods_in(summary)
    methods = [m for m in every if parse_label(m).hidden_layers == 1]
    deeper = [m for m in every if parse_label(m).hidden_layers != 1]
    decimals = {(d, metric): _digits(summary, d, metric) for d in datasets for metric in ("rmse", "test_ll")}
    lines = [
        "Published columns: " + "; ".join(f"*{k}*: {v}" for k, v in SOURCES.items()) + ".",
        "",
        "A cell that averages fewer splits than the data set's fullest column says how many, "
        "e.g. (3/20): it is not yet comparable with the others. Each data set gives its means to "
        "the precision of the smallest standard error among its runs (two to five decimals); the "
        "published columns keep the papers' two.",
        "",
    ]
    for metric, title in (
        ("rmse", "Test RMSE (lower is better)"),
        ("test_ll", "Test log-likelihood (higher is better)"),
    ):
        index = 0 if metric == "rmse" else 2
        head = ["data set", *methods, *PUBLISHED]
        lines += [f"### {title}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for d in datasets:
            if not any((d, m) in summary for m in methods):
                continue
            full = max(summary[(d, m)]["splits"] for m in every if (d, m) in summary)
            cells = [_split_cell(summary.get((d, m)), metric, decimals[(d, metric)], full) for m in methods]
            pub = [
                _cell((p[d][index], p[d][index + 1]), 2) if d in p else "—"  # at the published precision
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
        digits = decimals[(d, "rmse")]
        for m in methods:
            kind = parse_label(m)
            if kind.method != "mc-dropout" or (d, m) not in summary:
                continue
            s = summary[(d, m)]
            verdict = _verdict(s, PUBLISHED[REFERENCE][d]) if d in PUBLISHED[REFERENCE] else "—"
            notes = [] if kind.per_example_masks else ["mask per draw"]
            notes += [] if kind.retrain else ["grid network scored"]
            name = f"{d} ({', '.join(notes)})" if notes else d
            lines.append(
                f"| {name} | {_cell(s['rmse'], digits)} | {_cell(s['rmse_standard'], digits)} | "
                f"{s['splits']} | {_wall_time(s)} | {verdict} |"
            )
    lines += [
        "",
        "### Splits run and wall time of the whole protocol (grid search included)",
        "",
        "| data set | " + " | ".join(methods) + " |",
        "|" + "---|" * (len(methods) + 1),
    ]
    for d in datasets:
        if not any((d, m) in summary for m in methods):
            continue
        cells = [_splits_and_time(summary.get((d, m))) for m in methods]
        lines.append("| " + " | ".join([d, *cells]) + " |")
    lines += _groups_table(summary, datasets, every)
    if deeper:
        lines += ["", *_deeper_table(summary, datasets, deeper, decimals)]
    return "\n".join(lines) + "\n"


def _ran_on_gpu(row: dict[str, Any]) -> bool:
    return str(row.get("settings", {}).get("device", "cpu")).startswith("cuda")


def _wall_time(s: dict[str, Any]) -> str:
    """The protocol's wall time in minutes, marked where the runs were on a GPU."""
    cell = f"{s['protocol_seconds'] / 60:.1f} min"
    gpu = s.get("gpu_splits", 0)
    if not gpu:
        return cell
    return cell + (" (GPU)" if gpu == s["splits"] else f" ({gpu} split{'s' * (gpu > 1)} on a GPU)")


def _splits_and_time(s: dict[str, Any] | None) -> str:
    return "—" if s is None else f"{s['splits']} · {_wall_time(s)}"


def _groups_table(summary: dict[tuple[str, str], Any], datasets: list[str], methods: list[str]) -> list[str]:
    """Where a run's splits trained in several groups (one command each, often in different
    sittings), each group's splits and wall time; a resumed group says how much of its time an
    earlier process trained before the checkpoint it resumed."""
    rows = []
    for d in datasets:
        for m in methods:
            s = summary.get((d, m))
            if s is None or len(s["groups"]) < 2:
                continue
            cells = []
            for g in s["groups"]:
                cell = f"{_split_ranges(g['splits'])}: {g['seconds'] / 60:.1f} min"
                if g["resumed_seconds"] > 0:
                    cell += f" ({g['resumed_seconds'] / 60:.1f} before a resume)"
                cells.append(cell)
            rows.append(f"| {d} | {m} | {len(s['groups'])} | {'; '.join(cells)} |")
    if not rows:
        return []
    return [
        "",
        "### Runs trained in several groups of splits",
        "",
        "Each group is one command over a range of splits; its wall time covers its grid search "
        "and final models, including any training an earlier process did before the checkpoint "
        "it resumed.",
        "",
        "| data set | run | groups | splits: protocol wall time |",
        "|---|---|---|---|",
        *rows,
    ]


def _deeper_table(
    summary: dict[tuple[str, str], Any],
    datasets: list[str],
    deeper: list[str],
    decimals: dict[tuple[str, str], int],
) -> list[str]:
    concrete = PUBLISHED["pub. Concrete 2017"]
    lines = [
        "### Networks with more hidden layers",
        "",
        "Published columns: *pub. Dropout 2017*: MC dropout with hand-tuned rates on two hidden layers "
        'of 50 units, Gal, Hron & Kendall 2017, Tables 3-4 ("Dropout"); *pub. Concrete 2017*: as above, '
        "on the same network.",
        "",
        "| data set | run | RMSE | test LL | splits · wall time | pub. Dropout 2017 | pub. Concrete 2017 |",
        "|---|---|---|---|---|---|---|",
    ]
    for d in datasets:
        for m in deeper:
            if (d, m) not in summary:
                continue
            s = summary[(d, m)]
            pubs = [
                f"{_cell((p[0], p[1]), 2)} / {_cell((p[2], p[3]), 2)}" if p is not None else "—"
                for p in (PUBLISHED_TWO_LAYERS.get(d), concrete.get(d))
            ]
            lines.append(
                f"| {d} | {m} | {_cell(s['rmse'], decimals[(d, 'rmse')])} | "
                f"{_cell(s['test_ll'], decimals[(d, 'test_ll')])} | "
                f"{_splits_and_time(s)} | {' | '.join(pubs)} |"
            )
    return lines
