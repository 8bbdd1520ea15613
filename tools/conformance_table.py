"""The conformance battery's measurements as a table: for each architecture of
tests/nn/conformance.py, 2,000 draws of ``MCDropout(net).predict`` against 2,000 of the network's
own MC-dropout passes (the statistics of tests/nn/test_conformance.py, the same seeds); with
``--inputs``, the networks of several inputs and of torch's own layers of
tests/nn/conformance_inputs.py (tests/front/test_inputs.py's statistics and seeds).

    python tools/conformance_table.py                   # docs/results/conformance/conformance.json
    python tools/conformance_table.py --inputs          # docs/results/conformance/inputs.json
    python tools/conformance_table.py --out other.json  # elsewhere (an earlier library, say)

Prints a markdown table: the largest |z| of the tests against Bonferroni's bound, the median sd
ratio, and whether the case passed; a case whose conversion or prediction raised is listed with
its error.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path
from typing import Any

import pyro
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pyro_dropout import MCDropout  # noqa: E402
from pyro_dropout_experiments.core.atomic import write_atomically  # noqa: E402
from tests.nn import conformance_inputs  # noqa: E402
from tests.nn.conformance import build, cases, compare_draws, front_options, own_draws  # noqa: E402

DRAWS = 2000


def measure(name: str) -> dict:
    case = cases()[name]
    net, x = build(case, seed=0)
    try:
        pyro.set_rng_seed(1)
        lib = (
            MCDropout(net, case.task, num_samples=DRAWS, **front_options(case.task))
            .predict(x)
            .samples[case.site]
        )
    except Exception as error:  # a case the library refuses or fails on: reported, not hidden
        first = (str(error).splitlines() or [""])[0]
        return {"error": f"{type(error).__name__}: {first[:160]}"}
    torch.manual_seed(2)
    return _row(compare_draws(lib, case.own(own_draws(net, x, DRAWS))), 0.1)


def _row(result: Any, band: float) -> dict:
    """A case's row: the tests' largest |z| and bound, the median sd ratio, and whether it passed
    (the ratio within ``1 ± band``)."""
    return {
        "max_z": round(result.max_z, 2),
        "threshold": round(result.threshold, 2),
        "tests": result.tests,
        "sd_ratio": round(result.sd_ratio, 3),
        "worst": result.worst,
        "passed": result.passed and 1 - band < result.sd_ratio < 1 + band,
    }


def measure_inputs(name: str) -> dict:
    """An inputs case: its inputs as the forward takes them, against the network's own passes."""
    case = conformance_inputs.cases()[name]
    torch.manual_seed(0)
    net, inputs = case.make().eval(), case.inputs()
    options = {"tau": 1.0} if case.task == "regression" else {}
    try:
        pyro.set_rng_seed(1)
        front = MCDropout(net, case.task, num_samples=DRAWS, shared=case.shared, **options)
        lib = front.predict(inputs).samples[case.site]
    except Exception as error:  # reported, not hidden
        first = (str(error).splitlines() or [""])[0]
        return {"error": f"{type(error).__name__}: {first[:160]}"}
    torch.manual_seed(2)
    own = conformance_inputs.own_passes(net, inputs, DRAWS)
    return _row(compare_draws(lib, own.squeeze(-1) if case.site == "mean" else own), 0.15)


def table(rows: dict[str, dict]) -> str:
    lines = [
        "| architecture | tests | largest \\|z\\| (bound) | median sd ratio | |",
        "| --- | ---: | ---: | ---: | --- |",
    ]
    for name, row in rows.items():
        if "error" in row:
            lines.append(f"| `{name}` | — | — | — | raised: {row['error']} |")
            continue
        verdict = "passed" if row["passed"] else f"**failed** ({row['worst']})"
        z = f"{row['max_z']:.2f} ({row['threshold']:.2f})"
        lines.append(f"| `{name}` | {row['tests']} | {z} | {row['sd_ratio']:.3f} | {verdict} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", action="store_true", help="the battery of several inputs")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    folder = ROOT / "docs" / "results" / "conformance"
    args.out = args.out or folder / ("inputs.json" if args.inputs else "conformance.json")
    torch.set_num_threads(1)
    if args.inputs:
        found = conformance_inputs.cases()
        names = [n for n, c in found.items() if c.needs is None or _has(c.needs)]
    else:
        names = [n for n in cases() if not n.startswith("hf-") or _has("transformers")]
    rows = {}
    for name in names:
        rows[name] = measure_inputs(name) if args.inputs else measure(name)
        print(name, rows[name], flush=True)
    payload = {
        "date": datetime.date.today().isoformat(),
        "draws": DRAWS,
        "torch": torch.__version__,
        "cases": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(args.out, json.dumps(payload, indent=2) + "\n")
    print(table(rows))
    print(f"wrote {args.out}")


def _has(package: str) -> bool:
    try:
        __import__(package)
    except ImportError:
        return False
    return True


if __name__ == "__main__":
    main()
