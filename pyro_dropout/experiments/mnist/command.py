"""``pyro-dropout mnist ood`` and ``pyro-dropout mnist rotated``: their flags, from
:class:`MnistSettings`; ``--quick`` sets the quick values of the settings not given."""

from __future__ import annotations

import argparse
from dataclasses import fields, replace
from pathlib import Path

from ..core import add_flags, from_args, int_list
from .predictors import METHODS
from .settings import QUICK, MnistSettings

__all__ = ["add_mnist"]


def _settings(args: argparse.Namespace) -> MnistSettings:
    settings = from_args(MnistSettings, args)
    if args.quick:
        defaults = {f.name: f.default for f in fields(MnistSettings)}
        given = {k for k in QUICK if getattr(settings, k) != defaults[k]}
        settings = replace(settings, **{k: v for k, v in QUICK.items() if k not in given})
    return settings


def _methods(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in METHODS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown methods {unknown}; choose from {', '.join(METHODS)}")
    return names


def _ood(args: argparse.Namespace) -> int:
    from .ood import run_ood
    from .table import ood_tables

    results = run_ood(
        _settings(args),
        Path(args.out),
        methods=args.methods,
        data_dir=args.data_dir,
        progress=not args.quiet,
    )
    print(ood_tables(results))
    return 0


def _rotated(args: argparse.Namespace) -> int:
    from .rotated import run_rotated

    results = run_rotated(_settings(args), Path(args.out), data_dir=args.data_dir, progress=not args.quiet)
    for d, ratio, p in zip(
        results["degrees"], results["variation_ratio"], results["mean_softmax"], strict=True
    ):
        top = max(range(len(p)), key=p.__getitem__)
        print(f"{d:5.0f}°  class {top} ({p[top]:.2f})  variation ratio {ratio:.2f}")
    return 0


def _concrete(args: argparse.Namespace) -> int:
    from .concrete_rates import SIZES, WIDTHS, run_concrete_rates

    sizes = args.sizes or ((1000, 5000) if args.quick else SIZES)
    widths = args.widths or ((512,) if args.quick else WIDTHS)
    results = run_concrete_rates(
        _settings(args),
        Path(args.out),
        sizes=sizes,
        widths=widths,
        min_steps=args.min_steps or (1000 if args.quick else 2000),
        data_dir=args.data_dir,
        progress=not args.quiet,
    )
    for size, rates in results["rates"].items():
        print(f"{int(size):6d} images: p per layer {', '.join(f'{p:.3f}' for p in rates)}")
    print(f"test accuracy (3x512, {max(sizes)} images): {results['accuracy']:.4f}")
    return 0


def _common(parser: argparse.ArgumentParser, out: str) -> None:
    parser.add_argument("--out", default=out, help=f"results.json and the figures go here (default: {out})")
    parser.add_argument(
        "--data-dir",
        default=None,
        help="folder holding mnist/, fashion-mnist/, notmnist/ (default: $PYRO_DROPOUT_DATA)",
    )
    parser.add_argument(
        "--quick", action="store_true", help=f"a first try, under 10 minutes on 2 cores: {QUICK} unless given"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    add_flags(parser, MnistSettings)


def add_mnist(sub: argparse._SubParsersAction) -> None:
    mnist = sub.add_parser("mnist", help="the MNIST experiments: ood, rotated, concrete")
    experiments = mnist.add_subparsers(dest="experiment", required=True)
    ood = experiments.add_parser(
        "ood", help="OOD and misclassification detection, calibration: five methods on LeNet"
    )
    _common(ood, "results/mnist-ood")
    ood.add_argument(
        "--methods", type=_methods, default=METHODS, help=f"comma-separated (default: {','.join(METHODS)})"
    )
    ood.set_defaults(func=_ood)
    rotated = experiments.add_parser("rotated", help="paper 000 Fig. 4: a rotated digit 1 under MC dropout")
    _common(rotated, "results/mnist-rotated")
    rotated.set_defaults(func=_rotated)
    concrete = experiments.add_parser("concrete", help="paper 001 Figs. 5-6: converged Concrete p per layer")
    _common(concrete, "results/mnist-concrete")
    concrete.add_argument(
        "--sizes",
        type=int_list,
        default=None,
        help="training set sizes (default 1000,5000,10000,25000,50000; quick 1000,5000)",
    )
    concrete.add_argument(
        "--widths",
        type=int_list,
        default=None,
        help="hidden units per layer (default 128,256,512,1024; quick 512)",
    )
    concrete.add_argument(
        "--min-steps", type=int, default=None, help="fewest steps of a run (default 2000; quick 1000)"
    )
    concrete.set_defaults(func=_concrete)
