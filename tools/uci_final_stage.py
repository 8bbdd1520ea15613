"""Re-run the final stage of finished UCI runs and compare with the stored results.

    python tools/uci_final_stage.py DATASET SPLITS [--method mc-dropout] [--results results/uci]
                                    [--seed S] [--data-dir DIR]

Reads each split's chosen hyper-parameters and settings from its result file, trains the
final models of those splits together (as the protocol did), scores them on the test rows
and prints the new and the stored RMSE and test log-likelihood. With the stored seed this
checks that a result reproduces; with another seed it shows how much one training run's
randomness moves a split. ``--every N`` also prints, every N epochs, each split's RMSE on its
training and test rows with the expected weights (standard dropout), which shows when a run
leaves its course; the random stream, and so the result, is unchanged. Nothing is written.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from pyro_dropout.prediction import predict_standard
from pyro_dropout.runtime import tune_cpu_allocator
from pyro_dropout_experiments.core import parse_splits
from pyro_dropout_experiments.uci import (
    Settings,
    Spec,
    UCIBenchmark,
    get_method,
    load_results,
    method_from_stored,
    parse_label,
    stack_rows,
    train_and_score,
)

HYPER = ("p", "tau", "epochs", "length_scale")


def _trajectory(data: Any, specs: list[Spec], every: int, log: Callable[[str], None]) -> Callable:
    """A monitor printing each run's standard-dropout RMSE on its train and test rows."""
    cpu = torch.device("cpu")
    x, y = {}, {}
    for k in ("train", "score"):
        x[k], y[k] = stack_rows(data, specs, lambda sp, k=k: getattr(sp, k), cpu)

    def monitor(epoch: int, model: Any, guide: Any, stats: Any) -> None:
        if epoch % every:
            return
        state = torch.get_rng_state()  # leave the training's random stream as it was
        with torch.no_grad():
            rmse = {}
            for k in x:
                mean = predict_standard(model, guide, stats.x(x[k])).means["obs"][0]
                f = mean * stats.y_std.unsqueeze(-1) + stats.y_mean.unsqueeze(-1)
                rmse[k] = (f - y[k]).pow(2).mean(-1).sqrt().tolist()
        torch.set_rng_state(state)
        pairs = zip(specs, rmse["train"], rmse["score"], strict=True)
        runs = ", ".join(f"{sp.split}: {a:.4g} / {b:.4g}" for sp, a, b in pairs)
        log(f"epoch {epoch}, RMSE train / test of the expected weights: {runs}")

    return monitor


def final_stage(
    dataset: str,
    splits: list[int],
    method: str,
    results: Path,
    seed: int | None,
    data_dir: str | None,
    every: int = 0,
    log: Callable[[str], None] = print,
) -> list[dict[str, Any]]:
    """Re-run the final stage; one ``{split, now: {rmse, test_ll}, stored: {...}}`` per split."""
    name = method
    kind = get_method(parse_label(name).method)
    if kind.members() != 1 or kind.fits_splits:
        raise ValueError(f"the final stage of {kind.name!r} is not one network per split")
    data = UCIBenchmark.load(dataset, data_dir)
    stored = load_results(results, data.name, name, splits)
    fitted = method_from_stored(kind.name, stored[0]["settings"])
    settings = Settings.from_stored(stored[0]["settings"])
    settings.progress = False
    if seed is not None:
        settings.seed = seed
    specs = [
        Spec(i, data.splits[i].train, data.splits[i].test, {k: r[k] for k in HYPER if r.get(k) is not None})
        for i, r in zip(splits, stored, strict=True)
    ]
    monitor = _trajectory(data, specs, every, log) if every else None
    scores = train_and_score(data, fitted, specs, settings, settings.num_samples, "final stage", monitor)
    return [
        {
            "split": i,
            "now": {"rmse": now["rmse"], "test_ll": now["test_ll"]},
            "stored": {"rmse": old["rmse"], "test_ll": old["test_ll"]},
        }
        for i, now, old in zip(splits, scores, stored, strict=True)
    ]


def _splits(text: str) -> list[int]:
    try:
        return parse_splits(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset")
    parser.add_argument("splits", type=_splits, help="e.g. 5-9")
    parser.add_argument("--method", default="mc-dropout", help="a label of the table: mc-dropout-per-draw...")
    parser.add_argument("--results", default="results/uci")
    parser.add_argument("--seed", type=int, default=None, help="default: the stored seed")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--every", type=int, default=0, help="print train/test RMSE every N epochs")
    args = parser.parse_args(argv)
    tune_cpu_allocator()
    rows = final_stage(
        args.dataset, args.splits, args.method, Path(args.results), args.seed, args.data_dir, args.every
    )
    for r in rows:
        now, old = r["now"], r["stored"]
        print(
            f"split {r['split']}: now RMSE {now['rmse']:.4f}, LL {now['test_ll']:.4f}; "
            f"stored RMSE {old['rmse']:.4f}, LL {old['test_ll']:.4f}"
        )
    return rows


if __name__ == "__main__":
    main()
