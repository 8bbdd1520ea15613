"""Does drawing one dropout mask per minibatch, rather than one per example, change the UCI result?

The library draws one mask per minibatch and particle during training by default (one function
draw, see docs/maths.md), or one per example with ``DropoutELBO(per_example_masks=True)``; the
published Keras code draws one per example. Both give unbiased estimates of
the same objective; they differ in gradient noise. This script trains the UCI network of the
protocol (one hidden ReLU layer, dropout before each weight layer, MSE + the weight decay
l^2 (1 - p) / (2 N tau), Adam, batch 128) on one split in plain PyTorch, both ways, from the same
initial weights and minibatch order, and scores each on the test rows with T function draws
(paper 000, eq. 13, tau on the original y scale). With ``--library-runs R`` it also trains R
copies of the library's own model of the protocol on the split, to show the spread that the
seed alone gives (``--library-only`` skips the plain-PyTorch runs; ``--library-masks example``
trains them with one mask per example).

    python examples/mask_granularity.py --dataset power-plant --split 0 --p 0.005 --tau 0.1
    python examples/mask_granularity.py --dataset kin8nm --split 0 --p 0.005 --tau 200 --library-runs 4
    python examples/mask_granularity.py --dataset power-plant --split 6 --p 0.005 --tau 0.05 \
        --library-runs 16 --library-only --seed 1
"""

from __future__ import annotations

import argparse
import math
import time
from typing import Any

import numpy as np
import torch
from tqdm.auto import trange

from pyro_dropout_experiments.uci import UCIBenchmark


def _forward(x: torch.Tensor, params: list[torch.Tensor], p: float, per_example: bool) -> torch.Tensor:
    w1, b1, w2, b2 = params

    def keep(shape: torch.Size) -> torch.Tensor:
        return (torch.rand(shape if per_example else shape[-1:]) >= p).to(x.dtype) / (1 - p)

    hidden = torch.relu((x * keep(x.shape)) @ w1 + b1)
    return ((hidden * keep(hidden.shape)) @ w2 + b2).squeeze(-1)


def train_and_score(
    x: torch.Tensor,
    y: torch.Tensor,
    x_test: torch.Tensor,
    y_test: torch.Tensor,
    hidden: int,
    p: float,
    tau: float,
    epochs: int,
    per_example: bool,
    num_samples: int,
    seed: int = 0,
    desc: str = "epochs",
) -> dict[str, float]:
    """Train on (x, y), standardised with their own statistics; score on the test rows."""
    x_mean, x_std = x.mean(0), x.std(0)
    x_std = torch.where(x_std > 0, x_std, torch.ones_like(x_std))
    y_mean, y_std = y.mean(), y.std()
    xs, ys, xt = (x - x_mean) / x_std, (y - y_mean) / y_std, (x_test - x_mean) / x_std
    torch.manual_seed(seed)
    n, d = xs.shape
    params = [
        (torch.randn(d, hidden) / math.sqrt(d)).requires_grad_(),
        torch.zeros(hidden, requires_grad=True),
        (torch.randn(hidden, 1) / math.sqrt(hidden)).requires_grad_(),
        torch.zeros(1, requires_grad=True),
    ]
    opt = torch.optim.Adam(params, lr=1e-3)
    decay = 1e-4 * (1 - p) / (2 * n * tau)  # l = 1e-2
    batches = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed + 1)  # the masks
    start = time.perf_counter()
    for _ in trange(epochs, desc=desc, unit="epoch", leave=False):  # minutes on the larger sets
        for idx in torch.randperm(n, generator=batches).split(128):
            fit = (_forward(xs[idx], params, p, per_example) - ys[idx]).pow(2).mean()
            loss = fit + decay * (params[0].pow(2).sum() + params[2].pow(2).sum())
            opt.zero_grad()
            loss.backward()
            opt.step()
    seconds = time.perf_counter() - start
    with torch.no_grad():
        draws = torch.stack([_forward(xt, params, p, False) for _ in range(num_samples)]) * y_std + y_mean
        ll = torch.logsumexp(-0.5 * tau * (y_test - draws).pow(2), 0) - math.log(num_samples)
        ll = ll - 0.5 * math.log(2 * math.pi) + 0.5 * math.log(tau)
        return {
            "rmse": float((draws.mean(0) - y_test).pow(2).mean().sqrt()),
            "test_ll": float(ll.mean()),
            "seconds": seconds,
        }


def main(argv: list[str] | None = None) -> dict[str, dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="power-plant")
    parser.add_argument("--split", type=int, default=0)
    parser.add_argument("--p", type=float, default=0.005)
    parser.add_argument("--tau", type=float, default=0.1)
    parser.add_argument("--epochs", type=int, default=None, help="default: n_epochs.txt x 100")
    parser.add_argument("--num-samples", type=int, default=2000)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--seed", type=int, default=0, help="initial weights, minibatch order and masks")
    parser.add_argument(
        "--library-runs",
        type=int,
        default=0,
        help="also train this many copies of the library's UCI model on the split, as one vectorised model",
    )
    parser.add_argument(
        "--library-only", action="store_true", help="skip the two plain-PyTorch runs (with --library-runs)"
    )
    parser.add_argument(
        "--library-masks",
        choices=("draw", "example"),
        default="draw",
        help="the library runs' training masks: one per function draw (default) or one per example",
    )
    args = parser.parse_args(argv)
    if args.library_only and not args.library_runs:
        parser.error("--library-only needs --library-runs R")
    torch.set_default_dtype(torch.float32)
    data = UCIBenchmark.load(args.dataset, args.data_dir)
    split = data.splits[args.split]
    x = torch.as_tensor(data.x, dtype=torch.float32)
    y = torch.as_tensor(data.y, dtype=torch.float32)
    train, test = split.train, split.test
    epochs = args.epochs or data.n_epochs * 100
    out = {}
    granularities = () if args.library_only else (("per_example", True), ("per_minibatch", False))
    for name, per_example in granularities:
        out[name] = train_and_score(
            x[train],
            y[train],
            x[test],
            y[test],
            data.n_hidden,
            args.p,
            args.tau,
            epochs,
            per_example,
            args.num_samples,
            args.seed,
            desc=f"mask per {name[4:].replace('_', ' ')}",
        )
        r = out[name]
        print(
            f"{args.dataset} split {args.split}, seed {args.seed}, p={args.p}, tau={args.tau}, "
            f"{epochs} epochs, mask per {name[4:].replace('_', ' ')}: RMSE {r['rmse']:.3f}, "
            f"test LL {r['test_ll']:.3f} ({r['seconds']:.0f} s)"
        )
    if args.library_runs:
        out["library"] = library_runs(data, train, test, epochs, args)
    return out


def library_runs(
    data: UCIBenchmark, train: np.ndarray, test: np.ndarray, epochs: int, args: argparse.Namespace
) -> dict[str, Any]:
    """The library's protocol model (``MLP(runs=R)``, ``DropoutGuide``, ``DropoutELBO``), R copies."""
    from pyro_dropout_experiments.uci import Settings, Spec, get_method, train_and_score

    hyper = {"p": args.p, "tau": args.tau, "epochs": epochs}
    specs = [Spec(args.split, train, test, dict(hyper)) for _ in range(args.library_runs)]
    settings = Settings(progress=True, seed=args.seed, per_example_masks=args.library_masks == "example")
    start = time.perf_counter()
    scores = train_and_score(data, get_method("mc-dropout"), specs, settings, args.num_samples, "")
    for r in scores:
        print(
            f"{data.name} split {args.split}, library (mask per {args.library_masks}): "
            f"RMSE {r['rmse']:.3f}, test LL {r['test_ll']:.3f}"
        )
    return {
        "rmse": [r["rmse"] for r in scores],
        "test_ll": [r["test_ll"] for r in scores],
        "seconds": time.perf_counter() - start,
    }


if __name__ == "__main__":
    main()
