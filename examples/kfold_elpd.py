"""Which elpd to compare dropout models by: PSIS-LOO on the export, K-fold cross-validation, and
the held-out test log-likelihood they both estimate.

On 60 points of sin(2x) + noise 0.2 on [-2, 2], a 1-20-1 ReLU net and a linear model (both
``MLP(..., tau="learned")`` under ``DropoutGuide`` at its defaults, ``DropoutELBO(num_particles=4)``,
800 steps) are scored three ways, per point: the test log-likelihood on 500 fresh points of the
same distribution (``evaluate``), ``az.loo`` on ``to_arviz`` of the fit on the 60 points (with
the share of Pareto k above 0.7), ``reloo`` (PSIS-LOO with each point whose k exceeds 0.7 scored
by a fit without it), and ``kfold`` (K = 10; its folds trained together, and with ``--loop`` one
after another as well). Then ``az.compare`` on the K-fold results. Prints one JSON object.

    python examples/kfold_elpd.py                    # the settings of docs/analysis.md
    python examples/kfold_elpd.py --steps 50 --k 3   # quicker
    python examples/kfold_elpd.py --loop             # also time K-fold with the folds one by one
    python examples/kfold_elpd.py --no-reloo         # without reloo's one fit per flagged point
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from typing import Any

import arviz as az
import numpy as np
import pyro
import torch
from pyro.infer import SVI

from pyro_dropout import DropoutELBO, DropoutGuide, evaluate, to_arviz
from pyro_dropout.export import kfold, reloo
from pyro_dropout.nn import MLP

MODELS = {"relu 1-20-1": (20,), "linear": ()}


def data(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 1, generator=g) * 4 - 2
    return x, torch.sin(2 * x[:, 0]) + 0.2 * torch.randn(n, generator=g)


def fitted(hidden: tuple[int, ...], x: torch.Tensor, y: torch.Tensor, steps: int) -> tuple[Any, Any]:
    pyro.clear_param_store()
    pyro.set_rng_seed(1)
    model = MLP(1, hidden=hidden, tau="learned")
    guide = DropoutGuide(model)
    svi = SVI(model, guide, pyro.optim.Adam({"lr": 1e-2}), DropoutELBO(num_particles=4))
    for _ in range(steps):
        svi.step(x, y)
    return model, guide


def score(hidden: tuple[int, ...], args: argparse.Namespace) -> tuple[dict[str, float], Any]:
    n = args.points
    (x, y), (x_test, y_test) = data(n, 0), data(500, 1)
    model, guide = fitted(hidden, x, y, args.steps)
    test_ll = evaluate(model, guide, x_test, y_test, num_samples=args.num_samples).test_ll
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        psis = az.loo(to_arviz(model, guide, x, y, num_samples=args.num_samples), pointwise=True)
    make = lambda: MLP(1, hidden=hidden, tau="learned")  # noqa: E731
    fit = dict(steps=args.steps, loss=DropoutELBO(num_particles=4), num_samples=args.num_samples)
    start = time.perf_counter()
    folds = kfold(make, x, y, k=args.k, **fit)
    row = {
        "test_ll_per_point": test_ll,
        "psis_loo_per_point": float(psis["elpd_loo"]) / n,
        "share_pareto_k_above_0.7": float((np.asarray(psis["pareto_k"]) > 0.7).mean()),
        "kfold_per_point": float(folds["elpd_loo"]) / n,
        "kfold_seconds": time.perf_counter() - start,
    }
    if not args.no_reloo:
        start = time.perf_counter()
        row["reloo_per_point"] = float(reloo(make, x, y, psis, **fit)["elpd_loo"]) / n
        row["reloo_refits"] = int((np.asarray(psis["pareto_k"]) > 0.7).sum())
        row["reloo_seconds"] = time.perf_counter() - start
    if args.loop:
        start = time.perf_counter()
        looped = kfold(make, x, y, k=args.k, vectorize=False, **fit)
        row["kfold_one_by_one_per_point"] = float(looped["elpd_loo"]) / n
        row["kfold_one_by_one_seconds"] = time.perf_counter() - start
    return row, folds


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=800, help="SVI steps of each fit (default 800)")
    parser.add_argument("--k", type=int, default=10, help="folds (default 10)")
    parser.add_argument("--num-samples", type=int, default=500, help="MC-dropout draws (default 500)")
    parser.add_argument("--loop", action="store_true", help="also run K-fold with the folds one by one")
    parser.add_argument("--no-reloo", action="store_true", help="skip reloo (one fit per flagged point)")
    parser.add_argument("--points", type=int, default=60, help="training points (default 60)")
    args = parser.parse_args(argv)
    rows, folds = {}, {}
    for name, hidden in MODELS.items():
        rows[name], folds[name] = score(hidden, args)
    table = az.compare(folds)
    worse = table.index[-1]
    out = {
        "models": rows,
        "compare_ranks": list(table.index),
        "elpd_diff": float(table.loc[worse, "elpd_diff"]),
        "dse": float(table.loc[worse, "dse"]),
    }
    print(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
