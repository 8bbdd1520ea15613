"""The UCI results table: every method and data set next to the published numbers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..core.store import ResultStore
from .headline import best_within_one_se, split_methods
from .labels import label_of, parse_label
from .published import PUBLISHED, PUBLISHED_TWO_LAYERS, REFERENCE, SOURCES
from .settings import Settings
from .summary import (
    cell,
    decimals_for,
    methods_in,
    split_cell,
    split_ranges,
    splits_and_time,
    summarise,
    verdict,
    wall_time,
)

__all__ = ["collect", "markdown_table"]


def collect(results: Path) -> list[dict[str, Any]]:
    """Every per-split JSON file under ``results``."""
    if not results.is_dir():
        raise FileNotFoundError(
            f"no results folder {results}; run `pyro-dropout uci ... --out {results}` first"
        )
    store = ResultStore(results)
    files = store.results()
    if not files:
        raise FileNotFoundError(
            f"no result files (*.json) under {results}; run `pyro-dropout uci ... --out {results}` first"
        )
    rows = [store.read_result(p) for p in files]
    _refuse_copies(rows, files)
    return rows


def _refuse_copies(rows: list[dict[str, Any]], files: list[Path]) -> None:
    """One split of one run counted once: two files holding it (a copy in a subfolder, or two runs
    with other settings) are an error naming both, never a mean over both."""
    seen: dict[tuple[str, str, int], Path] = {}
    for row, path in zip(rows, files, strict=True):
        key = (row["dataset"], label_of(row), row["split"])
        if key in seen:
            raise ValueError(
                f"{seen[key]} and {path} both hold split {key[2]} of {key[0]} {key[1]}: the table would "
                "count it twice; move one of them out of the folder"
            )
        seen[key] = path


def shorter_than_the_protocol(rows: list[dict[str, Any]]) -> bool:
    """Whether any run trained for fewer epochs or scored fewer test draws than the protocol (a
    ``--quick`` run): its figures are not comparable with the published ones."""
    full = Settings()
    return any(
        r.get("settings", {}).get("epochs_multiplier", full.epochs_multiplier) < full.epochs_multiplier
        or r.get("settings", {}).get("num_samples", full.num_samples) < full.num_samples
        for r in rows
    )


QUICK_NOTE = (
    "**Shorter runs than the protocol's** (`--quick`, or fewer epochs or test draws): these figures "
    "are a first try, not comparable with the published columns; no cell is marked best and none is "
    "checked against the 2018 re-run."
)


# what the tables' cells mean, above them
_PREAMBLE = [
    "Published columns: " + "; ".join(f"*{k}*: {v}" for k, v in SOURCES.items()) + ".",
    "",
    "A cell that averages fewer splits than the data set's fullest column says how many, "
    "e.g. (3/20): it is not yet comparable with the others. Each data set gives its means to "
    "the precision of the smallest standard error among its runs (two to five decimals); the "
    "published columns keep the papers' two.",
    "",
    "The headline tables hold each method as the protocol runs it; a bold cell is the best of "
    "its row within its own standard error (among the runs of every split). The variants "
    "(one mask per draw, the grid network scored, other settings) follow in their own tables.",
    "",
]


def markdown_table(rows: list[dict[str, Any]], full: bool = True) -> str:
    """Markdown tables of test RMSE and test log-likelihood (mean ± standard error over splits).

    Runs of the protocol's one-hidden-layer network fill the main tables; runs with more
    hidden layers (labels ``...-L-layers``) get their own table, next to paper 001's
    two-layer figures. ``full=False``: without the standard-dropout, wall-time and run-group
    tables (what the docs page leaves to ``pyro-dropout uci-table``). Runs shorter than the
    protocol's are said to be so, and nothing is marked best or checked against the papers."""
    quick = shorter_than_the_protocol(rows)
    summary = summarise(rows)
    datasets = sorted({d for d, _ in summary})
    every = methods_in(summary)
    methods = [m for m in every if parse_label(m).hidden_layers == 1]
    deeper = [m for m in every if parse_label(m).hidden_layers != 1]
    decimals = {
        (d, metric): decimals_for(summary, d, metric) for d in datasets for metric in ("rmse", "test_ll")
    }
    lines = [*([QUICK_NOTE, ""] if quick else []), *_PREAMBLE]
    headline, variants = split_methods(methods)
    for metric, title in (
        ("rmse", "Test RMSE (lower is better)"),
        ("test_ll", "Test log-likelihood (higher is better)"),
    ):
        if headline:
            lines += _metric_table(
                summary, datasets, headline, every, metric, title, decimals, headline=True, bold=not quick
            )
    for metric, title in (("rmse", "Variants: test RMSE"), ("test_ll", "Variants: test log-likelihood")):
        if variants:
            lines += _metric_table(
                summary, datasets, variants, every, metric, title, decimals, headline=False
            )
    if full:
        lines += _standard_dropout_table(summary, datasets, methods, decimals, compare=not quick)
        lines += _timing_table(summary, datasets, methods)
        lines += _groups_table(summary, datasets, every)
    if deeper:
        lines += ["", *_deeper_table(summary, datasets, deeper, decimals)]
    return "\n".join(lines) + "\n"


def _metric_table(
    summary: dict[tuple[str, str], Any],
    datasets: list[str],
    methods: list[str],
    every: list[str],
    metric: str,
    title: str,
    decimals: dict[tuple[str, str], int],
    headline: bool = True,
    bold: bool = True,
) -> list[str]:
    """One metric's table; the headline one has the published columns and (``bold``) the best
    cells in bold."""
    index = 0 if metric == "rmse" else 2
    head = ["data set", *methods, *(PUBLISHED if headline else [])]
    lines = [f"### {title}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for d in datasets:
        if not any((d, m) in summary for m in methods):
            continue
        full = max(summary[(d, m)]["splits"] for m in every if (d, m) in summary)
        best = best_within_one_se(summary, d, methods, metric, full) if headline and bold else set()
        cells = [split_cell(summary.get((d, m)), metric, decimals[(d, metric)], full) for m in methods]
        cells = [f"**{c}**" if m in best else c for m, c in zip(methods, cells, strict=True)]
        pub = [
            cell((p[d][index], p[d][index + 1]), 2) if d in p else "—"  # at the published precision
            for p in PUBLISHED.values()
        ]
        lines.append("| " + " | ".join([d, *cells, *(pub if headline else [])]) + " |")
    return [*lines, ""]


def _standard_dropout_table(
    summary: dict[tuple[str, str], Any],
    datasets: list[str],
    methods: list[str],
    decimals: dict[tuple[str, str], int],
    compare: bool = True,
) -> list[str]:
    lines = [
        "### Standard dropout (weight averaging) RMSE and MC dropout against the 2018 re-run",
        "",
        "| data set | MC dropout RMSE | standard dropout RMSE | splits | protocol wall time "
        "| vs 2018 re-run |",
        "|---|---|---|---|---|---|",
    ]
    for d in datasets:
        places = decimals[(d, "rmse")]
        for m in methods:
            kind = parse_label(m)
            if kind.method != "mc-dropout" or (d, m) not in summary:
                continue
            s = summary[(d, m)]
            known = compare and d in PUBLISHED[REFERENCE]
            matched = verdict(s, PUBLISHED[REFERENCE][d]) if known else "—"
            notes = [] if kind.per_example_masks else ["mask per draw"]
            notes += [] if kind.retrain else ["grid network scored"]
            notes += ["own tau grid"] if kind.own_tau_grid else []
            name = f"{d} ({', '.join(notes)})" if notes else d
            lines.append(
                f"| {name} | {cell(s['rmse'], places)} | {cell(s['rmse_standard'], places)} | "
                f"{s['splits']} | {wall_time(s)} | {matched} |"
            )
    return lines


def _timing_table(summary: dict[tuple[str, str], Any], datasets: list[str], methods: list[str]) -> list[str]:
    lines = [
        "",
        "### Splits run and wall time of the whole protocol (grid search included)",
        "",
        "| data set | " + " | ".join(methods) + " |",
        "|" + "---|" * (len(methods) + 1),
    ]
    for d in datasets:
        if not any((d, m) in summary for m in methods):
            continue
        cells = [splits_and_time(summary.get((d, m))) for m in methods]
        lines.append("| " + " | ".join([d, *cells]) + " |")
    return lines


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
                cell = f"{split_ranges(g['splits'])}: {g['seconds'] / 60:.1f} min"
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
                f"{cell((p[0], p[1]), 2)} / {cell((p[2], p[3]), 2)}" if p is not None else "—"
                for p in (PUBLISHED_TWO_LAYERS.get(d), concrete.get(d))
            ]
            lines.append(
                f"| {d} | {m} | {cell(s['rmse'], decimals[(d, 'rmse')])} | "
                f"{cell(s['test_ll'], decimals[(d, 'test_ll')])} | "
                f"{splits_and_time(s)} | {' | '.join(pubs)} |"
            )
    return lines
