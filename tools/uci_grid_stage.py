"""Re-run the grid search of finished UCI runs with changed settings; compare on the validation rows.

    python tools/uci_grid_stage.py DATASET SPLITS [--method mc-dropout] [--set KEY=VALUE ...]
                                   [--results results/uci] [--data-dir DIR]

Reads each split's result file (its settings and its validation scores), re-runs the
protocol's grid search on those splits with the stored settings changed by ``--set`` (e.g.
``--set init=glorot``), and prints, per split, every grid point's validation
log-likelihood then and now, and the best one. The summary pairs by split: the mean over
splits of (now - stored) for the best grid point and for the average grid point, with its
standard error. Only the validation rows (the last 20% of each training split) are scored,
so a setting can be chosen this way without looking at the test rows. Nothing is written.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from pyro_dropout.runtime import tune_cpu_allocator
from pyro_dropout_experiments.core import flatten, parse_splits, unflatten
from pyro_dropout_experiments.uci import (
    Settings,
    UCIBenchmark,
    UCIProtocol,
    get_method,
    grid_setup,
    load_results,
    mean_se,
    method_class,
    method_names,
    parse_label,
)
from pyro_dropout_experiments.uci.settings import LEGACY_SETTINGS


def _defaults() -> dict[str, Any]:
    """Every key ``--set`` takes: the protocol's settings and every method's options (prefixed)."""
    keys = flatten(Settings())
    for name in method_names():
        cls, _ = method_class(name)
        keys.update(
            {
                k: tuple(v) if isinstance(v, list) else v
                for k, v in flatten(cls.options_class(), cls.prefix).items()
            }
        )
    return keys


def parse_override(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` for a setting (``seed``) or a method's option (``concrete_tau_init``), the
    value converted to the field's type."""
    key, sep, value = text.partition("=")
    defaults = _defaults()
    if not sep or key not in defaults:
        raise ValueError(f"--set needs KEY=VALUE with KEY one of {', '.join(sorted(defaults))}; got {text!r}")
    default = defaults[key]
    if isinstance(default, bool):
        if value.lower() not in ("true", "false"):
            raise ValueError(f"--set {key} takes true or false, got {value!r}")
        return key, value.lower() == "true"
    if isinstance(default, tuple):
        return key, tuple(float(v) for v in value.split(","))
    return key, type(default)(value)


def compare_grid(
    dataset: str,
    splits: list[int],
    method: str,
    results: Path,
    overrides: dict[str, Any],
    data_dir: str | None,
) -> dict[str, Any]:
    """Re-run the grid; ``{"splits": [{split, points: [{hyper, stored, now}], best_*}], summary}``."""
    name = method
    data = UCIBenchmark.load(dataset, data_dir)
    stored = load_results(results, data.name, name, splits)
    if not all(row.get("validation") for row in stored):
        raise ValueError(f"the {name} results hold no validation scores (a method without a grid search?)")
    flat = {**stored[0]["settings"], **overrides, "progress": False}
    settings = unflatten(Settings, flat, legacy=LEGACY_SETTINGS)
    cls, _ = method_class(parse_label(name).method)
    fitted = get_method(
        parse_label(name).method, unflatten(cls.options_class, flat, cls.prefix, LEGACY_SETTINGS)
    )
    now = UCIProtocol(data, fitted, settings, log=lambda _: None).grid_stage(splits)
    keys = list(fitted.grid(grid_setup(data, settings))[0])  # the grid's own hyper-parameters only

    def point(row: dict[str, Any]) -> tuple:
        return tuple(row[k] for k in keys)

    per_split = []
    for i, old in zip(splits, stored, strict=True):
        before = {point(r): r["test_ll"] for r in old["validation"]}
        after = {point(r): r["test_ll"] for r in now[i]}
        if set(before) != set(after):
            raise ValueError(f"split {i}: the stored grid {sorted(before)} is not this grid {sorted(after)}")
        points = [
            {"hyper": dict(zip(keys, k, strict=True)), "stored": before[k], "now": after[k]} for k in before
        ]
        per_split.append(
            {
                "split": i,
                "points": points,
                "best_stored": max(before.values()),
                "best_now": max(after.values()),
                "mean_difference": sum(after[k] - before[k] for k in before) / len(before),
            }
        )
    return {
        "settings": overrides,
        "splits": per_split,
        "best": mean_se([r["best_now"] - r["best_stored"] for r in per_split]),
        "average_point": mean_se([r["mean_difference"] for r in per_split]),
    }


def _splits(text: str) -> list[int]:
    try:
        return parse_splits(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset")
    parser.add_argument("splits", type=_splits, help="e.g. 0-4")
    parser.add_argument("--method", default="mc-dropout", help="a label of the table: mc-dropout-per-draw...")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="e.g. init=glorot")
    parser.add_argument("--results", default="results/uci")
    parser.add_argument("--data-dir", default=None)
    args = parser.parse_args(argv)
    try:
        overrides = dict(parse_override(text) for text in args.set)
    except ValueError as err:
        parser.error(str(err))
    tune_cpu_allocator()
    out = compare_grid(args.dataset, args.splits, args.method, Path(args.results), overrides, args.data_dir)
    for r in out["splits"]:
        points = "; ".join(
            f"{', '.join(f'{k}={v}' for k, v in p['hyper'].items())}: {p['stored']:.4f} -> {p['now']:.4f}"
            for p in r["points"]
        )
        print(f"split {r['split']}: best {r['best_stored']:.4f} -> {r['best_now']:.4f} ({points})")
    (best, best_se), (avg, avg_se) = out["best"], out["average_point"]
    print(
        f"validation LL, now - stored, over {len(out['splits'])} splits: best grid point "
        f"{best:+.4f} +- {best_se:.4f}, average grid point {avg:+.4f} +- {avg_se:.4f}"
    )
    return out


if __name__ == "__main__":
    main()
