"""Pair stored UCI results split by split: with the 2018 re-run's published per-split results,
or with another of our methods.

Run: python tools/uci_paired.py DATASET [--method mc-dropout] [--against LABEL] [--results results/uci]
     [--against-results FOLDER]   # the other label's folder (default: --results), e.g. an earlier default

Prints, for every split run, our RMSE and test log-likelihood next to the published ones (or
next to those of ``--against``, a result label such as ``mc-dropout`` or ``hmc``, on the splits
both have run), and the mean paired difference (``--method`` minus the other) with its
standard error. Pairing removes the split-to-split spread that dominates the standard errors
of the two means. The published per-split figures, and where they come from, are in
``tools/published_uci_per_split.json``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from pyro_dropout_experiments.core import is_result_file
from pyro_dropout_experiments.uci import mean_se

PUBLISHED = Path(__file__).resolve().parent / "published_uci_per_split.json"


def _ours(dataset: str, method: str, results: Path) -> dict[int, dict]:
    """The stored results of ``method`` (a result label) on ``dataset``, by split."""
    ours = {}
    for path in sorted(results.glob(f"{dataset}_{method}_split*.json")):
        if not is_result_file(path):
            continue
        record = json.loads(path.read_text())
        ours[int(record["split"])] = record
    if not ours:
        raise SystemExit(f"no results for {dataset} / {method} in {results}")
    return ours


def paired_methods(
    dataset: str, method: str, against: str, results: Path, against_results: Path | None = None
) -> dict[str, dict[str, float]]:
    """``{metric: {"mean": ..., "se": ..., "n": ...}}`` of ``method`` minus ``against`` (read from
    ``against_results``, default ``results``) on the splits both have run (RMSE, test
    log-likelihood, 90% coverage)."""
    ours, theirs = _ours(dataset, method, results), _ours(dataset, against, against_results or results)
    common = sorted(set(ours) & set(theirs))
    if not common:
        raise SystemExit(f"{method} and {against} share no split of {dataset} in {results}")
    out = {}
    for metric in ("rmse", "test_ll", "coverage_90"):
        if all(metric in ours[s] and metric in theirs[s] for s in common):
            mean, se = mean_se([ours[s][metric] - theirs[s][metric] for s in common])
            out[metric] = {"mean": mean, "se": se, "n": float(len(common))}
    for s in common:
        cells = [f"{m} {ours[s][m]:.4g} / {theirs[s][m]:.4g}" for m in ("rmse", "test_ll")]
        print(f"split {s:2d}: " + ", ".join(cells) + f"  ({method} / {against})")
    return out


def paired(dataset: str, method: str, results: Path) -> dict[str, dict[str, float]]:
    """``{metric: {"mean": ..., "se": ..., "n": ...}}`` of ours minus published, per metric."""
    published = json.loads(PUBLISHED.read_text()).get(dataset)
    if published is None:
        raise SystemExit(f"no published per-split results for '{dataset}' in {PUBLISHED.name}")
    ours = _ours(dataset, method, results)
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
    parser.add_argument("--against", default=None, help="another result label (default: the published runs)")
    parser.add_argument("--results", type=Path, default=Path("results/uci"))
    parser.add_argument("--against-results", type=Path, default=None, help="the folder of --against")
    args = parser.parse_args(argv)
    if args.against is None:
        out, what = paired(args.dataset, args.method, args.results), "ours - published"
    else:
        out = paired_methods(args.dataset, args.method, args.against, args.results, args.against_results)
        what = f"{args.method} - {args.against}"
    for metric, d in out.items():
        if int(d["n"]) == 1:  # no spread to estimate a standard error from
            print(f"{metric}: {what} = {d['mean']:+.4f} on one split (no standard error)")
        else:
            print(f"{metric}: {what} = {d['mean']:+.4f} +- {d['se']:.4f} over {int(d['n'])} splits")
    return out


if __name__ == "__main__":
    main()
