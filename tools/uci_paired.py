"""Pair stored UCI results with the 2018 re-run's published per-split results, split by split.

Run: python tools/uci_paired.py DATASET [--method mc-dropout] [--results results/uci]

Prints, for every split run, our RMSE and test log-likelihood next to the published ones,
and the mean paired difference (ours minus published) with its standard error. Pairing
removes the split-to-split spread that dominates the standard errors of the two means.
The published per-split figures, and where they come from, are in
``tools/published_uci_per_split.json``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from pyro_dropout.experiments.uci_table import is_result_file, mean_se

PUBLISHED = Path(__file__).resolve().parent / "published_uci_per_split.json"


def paired(dataset: str, method: str, results: Path) -> dict[str, dict[str, float]]:
    """``{metric: {"mean": ..., "se": ..., "n": ...}}`` of ours minus published, per metric."""
    published = json.loads(PUBLISHED.read_text()).get(dataset)
    if published is None:
        raise SystemExit(f"no published per-split results for '{dataset}' in {PUBLISHED.name}")
    ours = {}
    for path in sorted(results.glob(f"{dataset}_{method}_split*.json")):
        if not is_result_file(path):
            continue
        record = json.loads(path.read_text())
        ours[int(record["split"])] = record
    if not ours:
        raise SystemExit(f"no results for {dataset} / {method} in {results}")
    out = {}
    for metric, values in published.items():
        diffs = [ours[s][metric] - values[s] for s in sorted(ours) if s < len(values)]
        mean, se = mean_se(diffs)
        out[metric] = {"mean": mean, "se": se, "n": float(len(diffs))}
    for s in sorted(ours):
        cells = [f"{m} {ours[s][m]:.4g} / {published[m][s]:.4g}" for m in published if s < len(published[m])]
        print(f"split {s:2d}: " + ", ".join(cells) + "  (ours / published)")
    return out


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("dataset")
    parser.add_argument("--method", default="mc-dropout", help="a result label, e.g. mc-dropout-per-draw")
    parser.add_argument("--results", type=Path, default=Path("results/uci"))
    args = parser.parse_args(argv)
    out = paired(args.dataset, args.method, args.results)
    for metric, d in out.items():
        print(f"{metric}: ours - published = {d['mean']:+.4f} +- {d['se']:.4f} over {int(d['n'])} splits")
    return out


if __name__ == "__main__":
    main()
