"""The speed claims of README.md and docs/performance.md, from the benchmark of record's stored runs.

``benchmarks/svi_step.py --threads 1 --out svi_step_cpu_recordN`` writes one run; the runs the
docs quote are kept in ``docs/results/benchmarks/svi_step_cpu_record*.json``. :func:`table` is
the table of docs/performance.md and :func:`claims` the ranges the README states;
``tests/test_docs.py`` checks that both appear there as generated here.

    python tools/speed_record.py    # print the table and the claims
"""

from __future__ import annotations

import json
from pathlib import Path

RECORD = Path(__file__).resolve().parents[1] / "docs" / "results" / "benchmarks"
PATHS = {
    "svi": "`SVI`, `DropoutELBO()` / `BBAlpha(0.5)` (the default: recorded)",
    "svi_fused": '`SVI`, the default loss, `pyro.optim.Adam({..., "fused": True})`',
    "svi_eager": '`SVI`, `graph="eager"`',
    "svi_record": '`SVI`, `graph="record"`',
    "svi_compile": '`SVI`, `graph="compile"`',
    "svi_joint": '`SVI`, `graph="compile"`, `JointOptim`',
    "compiled": "`CompiledSVI` (the default: compiled)",
    "compiled_record": '`CompiledSVI(graph="record")`',
    "autonormal": "Pyro `AutoNormal` + `Trace_ELBO` (peer)",
}
CASES = [
    ("uci", 32, "elbo"),
    ("uci", 128, "elbo"),
    ("wide", 128, "elbo"),
    ("uci", 32, "bbalpha"),
    ("uci", 128, "bbalpha"),
    ("wide", 128, "bbalpha"),
]
HEADS = [
    "UCI, B = 32, ELBO",
    "UCI, B = 128, ELBO",
    "wide, ELBO",
    "UCI, B = 32, BB-α K = 10",
    "UCI, B = 128, BB-α K = 10",
    "wide, BB-α K = 10",
]


def load(folder: Path = RECORD) -> list[dict]:
    """The stored runs of the benchmark of record, in order of their names."""
    runs = [json.loads(p.read_text()) for p in sorted(folder.glob("svi_step_cpu_record*.json"))]
    if not runs:
        raise FileNotFoundError(f"no svi_step_cpu_record*.json in {folder}")
    return runs


def _row(run: dict, case: tuple[str, int, str]) -> dict:
    name, batch, loss = case
    return next(r for r in run["rows"] if (r["case"], r["batch"], r["loss"]) == (name, batch, loss))


def ratios(runs: list[dict], kind: str, cases: list[tuple[str, int, str]]) -> list[float]:
    """``kind``'s median ratio to raw in every run and case (cases where it did not run left out)."""
    return [_row(run, c)[f"{kind}_vs_raw"] for run in runs for c in cases if f"{kind}_vs_raw" in _row(run, c)]


def span(values: list[float]) -> str:
    low, high = f"{min(values):.2f}", f"{max(values):.2f}"
    return f"{low}×" if low == high else f"{low}-{high}×"


def table(runs: list[dict]) -> str:
    """Each path's median step time over raw's, per case: run 1 / run 2 / ..."""
    lines = ["| path | " + " | ".join(HEADS) + " |", "| --- |" + " ---: |" * len(HEADS)]
    raw = [" / ".join(f"{_row(run, c)['raw_ms']:.2f} ms" for run in runs) for c in CASES]
    lines.append("| raw PyTorch step | " + " | ".join(raw) + " |")
    for kind, label in PATHS.items():
        cells = []
        for c in CASES:
            got = [
                f"{_row(run, c)[f'{kind}_vs_raw']:.2f}" for run in runs if f"{kind}_vs_raw" in _row(run, c)
            ]
            cells.append(" / ".join(got) if got else "—")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    dates = sorted({run["date"] for run in runs})
    threads = sorted({run["machine"]["threads"] for run in runs})
    lines.append("")
    lines.append(
        f"Median step time over the raw step's in the same interleaved blocks; {len(runs)} runs "
        f"of `python benchmarks/svi_step.py --threads {threads[0]}` on {', '.join(dates)}."
    )
    return "\n".join(lines)


def claims(runs: list[dict]) -> dict[str, str]:
    """The ranges the README quotes, each over both UCI batch sizes (or the wide net) and all runs."""
    uci, wide = CASES[:2], CASES[2:3]
    return {
        "default_uci": span(ratios(runs, "svi", uci)),
        "default_wide": span(ratios(runs, "svi", wide)),
        "eager_uci": span(ratios(runs, "svi_eager", uci)),
        "compile_uci": span(ratios(runs, "svi_compile", uci)),
        "joint_uci": span(ratios(runs, "svi_joint", uci)),
        "joint_wide": span(ratios(runs, "svi_joint", wide)),
        "compiled_uci": span(ratios(runs, "compiled", uci)),
        "compiled_wide": span(ratios(runs, "compiled", wide)),
        "compiled_record_uci": span(ratios(runs, "compiled_record", uci)),
        "autonormal_uci": span(ratios(runs, "autonormal", uci)),
    }


if __name__ == "__main__":
    record = load()
    print(table(record))
    print(json.dumps(claims(record), indent=1, ensure_ascii=False))
