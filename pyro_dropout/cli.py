"""The ``pyro-dropout`` command."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

__all__ = ["main"]


def _demo(args: argparse.Namespace) -> int:
    from .experiments.demo import run_demo

    run_demo(
        Path(args.out),
        steps=args.steps,
        num_samples=args.num_samples,
        seed=args.seed,
        loss=args.loss,
    )
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pyro-dropout", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="train MC dropout on built-in 1-d data; print figures, write a plot")
    demo.add_argument("--out", default="results/demo", help="output directory (default: results/demo)")
    demo.add_argument("--steps", type=int, default=3000)
    demo.add_argument("--num-samples", type=int, default=500)
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--loss", choices=["elbo", "bbalpha"], default="elbo")
    demo.set_defaults(func=_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
