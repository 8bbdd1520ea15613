"""HMC beside MC dropout in one ``az.compare`` table, on one split of the Boston housing data.

Both models are the UCI benchmark's 13-50-1 network with a learned noise precision, on inputs and
targets standardised by the training rows. HMC (NUTS, one chain) samples its weights under
N(0, 1) priors; its export (``mcmc_to_arviz``) holds the pointwise log-likelihood of the training
rows, and PSIS-LOO is checked on it (its Pareto k). MC dropout (``DropoutGuide`` at its defaults,
``DropoutELBO``) gets its elpd by K-fold cross-validation (``pyro_dropout.export.kfold``), since
PSIS-LOO is not valid on dropout draws (docs/analysis.md). Both are elpd per training row, so
``az.compare`` ranks like with like. The test rows' log-likelihood per point is printed beside
them, as the number both estimate. Prints one JSON object.

    python examples/hmc_vs_dropout.py                 # the settings of docs/analysis.md (~12 min)
    python examples/hmc_vs_dropout.py --warmup 20 --samples 20 --k 3 --steps 100   # quicker
    python examples/hmc_vs_dropout.py --hmc-kfold runs/hmc_folds   # HMC by K-fold too (K NUTS runs)

With ``--hmc-kfold FOLDER`` HMC is also scored by K-fold, as the dropout model is: one NUTS run
per fold on the other folds' rows, each fold's result written to FOLDER as it ends (a rerun keeps
the folds there, if made with the same settings, and runs the rest); about 100 minutes on one core
at the default settings.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

import arviz as az
import numpy as np
import pyro
import torch
from pyro.infer import MCMC, NUTS

from pyro_dropout import DropoutELBO, DropoutGuide, evaluate
from pyro_dropout.datasets import load_uci
from pyro_dropout.export import fold_of, kfold, kfold_result, loo, mcmc_to_arviz
from pyro_dropout.infer import CompiledSVI
from pyro_dropout.nn import MLP


def standardised(split: int, data_dir: str | None) -> tuple[torch.Tensor, ...]:
    """Training and test rows of ``split``, standardised by the training rows' mean and sd."""
    data = load_uci("bostonHousing", data_dir)
    rows = data.splits[split]
    x, y = (torch.tensor(a, dtype=torch.float32) for a in (data.x, data.y))
    x_train, y_train, x_test, y_test = x[rows.train], y[rows.train], x[rows.test], y[rows.test]
    mx, sx = x_train.mean(0), x_train.std(0).clamp_min(1e-6)
    my, sy = y_train.mean(), y_train.std()
    return (x_train - mx) / sx, (y_train - my) / sy, (x_test - mx) / sx, (y_test - my) / sy


def pointwise_ll(idata: Any) -> np.ndarray:
    """``[N]``: the log of the posterior's mean likelihood of each point."""
    ll = idata.log_likelihood["obs"].values  # [chain, draw, point]
    flat = ll.reshape(-1, ll.shape[-1])
    return np.logaddexp.reduce(flat, axis=0) - np.log(len(flat))


def point_ll(idata: Any) -> float:
    """The log of the posterior's mean likelihood per point, averaged over the points."""
    return float(pointwise_ll(idata).mean())


def nuts(x: torch.Tensor, y: torch.Tensor, args: argparse.Namespace, seed: int = 0) -> tuple[MLP, MCMC]:
    pyro.clear_param_store()
    pyro.set_rng_seed(seed)
    model = MLP(13, hidden=(50,), tau="learned", tau_prior=(0.1, 0.01), prior="normal")
    kernel = NUTS(model, jit_compile=True, ignore_jit_warnings=True, max_tree_depth=8)
    mcmc = MCMC(kernel, num_samples=args.samples, warmup_steps=args.warmup, disable_progbar=not args.progress)
    mcmc.run(x, y)
    return model, mcmc


def hmc(x, y, x_test, y_test, args) -> tuple[Any, dict[str, float]]:
    start = time.perf_counter()
    model, mcmc = nuts(x, y, args)
    seconds = time.perf_counter() - start
    result = loo(mcmc_to_arviz(model, mcmc, x, y))
    test = point_ll(mcmc_to_arviz(model, mcmc, x_test, y_test))
    k = np.asarray(result.pareto_k)
    summary = {"test_ll": test, "share_k_over_0.7": float((k > 0.7).mean()), "seconds": seconds}
    return result, summary


def dropout(x, y, x_test, y_test, args) -> tuple[Any, dict[str, float]]:
    def make() -> MLP:
        return MLP(13, hidden=(50,), tau="learned")

    start = time.perf_counter()
    result = kfold(make, x, y, k=args.k, steps=args.steps, num_samples=args.num_samples)
    seconds = time.perf_counter() - start
    pyro.clear_param_store()
    pyro.set_rng_seed(0)
    model = make()
    guide = DropoutGuide(model)
    svi = CompiledSVI(model, guide, pyro.optim.Adam({"lr": 1e-2}), DropoutELBO())
    for _ in range(args.steps):
        svi.step(x, y)
    test = evaluate(model, guide, x_test, y_test, num_samples=args.num_samples).test_ll
    return result, {"test_ll": float(test), "kfold_seconds": seconds}


def kept_fold(fold: int, args: argparse.Namespace) -> tuple[Path, dict, dict | None]:
    """Fold ``fold``'s file, its settings, and its result if a run with these settings kept one
    (an error if the file was made with others)."""
    path = Path(args.hmc_kfold) / f"fold{fold:02d}.json"
    settings = {"split": args.split, "k": args.k, "warmup": args.warmup, "samples": args.samples}
    if not path.is_file() or path.is_symlink():
        return path, settings, None
    kept = json.loads(path.read_text())
    if kept["settings"] != settings:
        raise ValueError(f"{path} was made with {kept['settings']}, not {settings}: use another folder")
    return path, settings, kept


def hmc_fold(
    x: torch.Tensor, y: torch.Tensor, folds: torch.Tensor, fold: int, args: argparse.Namespace
) -> dict:
    """Fold ``fold``'s NUTS run on the other folds' rows: every row's log predictive density."""
    path, settings, kept = kept_fold(fold, args)
    if kept is not None:
        return kept
    start = time.perf_counter()
    model, mcmc = nuts(x[folds != fold], y[folds != fold], args, seed=fold)
    scores = pointwise_ll(mcmc_to_arviz(model, mcmc, x, y))
    out = {"settings": settings, "scores": scores.tolist(), "seconds": time.perf_counter() - start}
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(out))
    os.replace(partial, path)  # atomic: a stopped run leaves no half-written fold
    return out


def hmc_kfold(x: torch.Tensor, y: torch.Tensor, args: argparse.Namespace) -> tuple[Any, dict[str, float]]:
    """HMC scored as the dropout model is: K NUTS runs, each on the other folds' rows."""
    folds = fold_of(len(x), args.k)  # the folds kfold deals at its default seed
    runs = [hmc_fold(x, y, folds, fold, args) for fold in range(args.k)]
    scores = torch.tensor([run["scores"] for run in runs], dtype=torch.float64)  # [K, N]
    result = kfold_result(scores, folds, args.samples)
    return result, {"seconds": float(sum(run["seconds"] for run in runs))}


def _run(args: argparse.Namespace) -> dict[str, Any]:
    for fold in range(args.k if args.hmc_kfold else 0):
        kept_fold(fold, args)  # a folder of other settings is refused before any run
    x, y, x_test, y_test = standardised(args.split, args.data_dir)
    n = len(x)
    results, extra = {}, {}
    if args.hmc_kfold:  # first, so a stopped run's kept folds are its progress
        results[f"hmc ({args.k}-fold)"], summary = hmc_kfold(x, y, args)
        extra["hmc_kfold"] = {
            "elpd_per_point": float(results[f"hmc ({args.k}-fold)"].elpd_loo) / n,
            **summary,
        }
    hmc_elpd, hmc_summary = hmc(x, y, x_test, y_test, args)
    dropout_elpd, dropout_summary = dropout(x, y, x_test, y_test, args)
    results.update({"hmc (PSIS-LOO)": hmc_elpd, f"mc-dropout ({args.k}-fold)": dropout_elpd})
    if args.hmc_kfold:  # like with like: the two K-fold estimates alone, their paired difference
        kfolds = {name: value for name, value in results.items() if "fold)" in name}
        extra["compare_kfold"] = compared(az.compare(kfolds))
    return {
        **extra,
        "rows": {"train": n, "test": len(x_test)},
        "hmc": {"elpd_per_point": float(hmc_elpd.elpd_loo) / n, **hmc_summary},
        "mc-dropout": {"elpd_per_point": float(dropout_elpd.elpd_loo) / n, **dropout_summary},
        "compare": compared(az.compare(results)),
    }


def compared(table: Any) -> dict[str, dict[str, float]]:
    """``az.compare``'s table as numbers, by model."""
    columns = ("rank", "elpd_loo", "p_loo", "elpd_diff", "se", "dse")
    return {name: {c: float(table.loc[name, c]) for c in columns} for name in table.index}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--split", type=int, default=0, help="the standard split (default 0)")
    parser.add_argument("--warmup", type=int, default=500, help="NUTS warm-up steps (the UCI protocol's 500)")
    parser.add_argument("--samples", type=int, default=500, help="NUTS draws kept (500)")
    parser.add_argument("--k", type=int, default=10, help="folds of the dropout model's K-fold elpd (10)")
    parser.add_argument("--steps", type=int, default=2000, help="full-batch training steps per fit (2000)")
    parser.add_argument("--num-samples", type=int, default=500, help="MC-dropout draws per prediction (500)")
    parser.add_argument("--data-dir", help="the folder holding uci/bostonHousing (default: the library's)")
    parser.add_argument("--progress", action="store_true", help="NUTS's progress bar")
    parser.add_argument(
        "--hmc-kfold", metavar="FOLDER", help="score HMC by K-fold too, each fold kept in FOLDER"
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="PyTorch's CPU threads (1: NUTS's tiny steps gain nothing from more)",
    )
    args = parser.parse_args(argv)
    threads = torch.get_num_threads()
    torch.set_num_threads(args.threads)
    try:
        out = _run(args)
    finally:
        torch.set_num_threads(threads)
    print(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
