"""``pyro-dropout mnist ood | rotated | concrete | bbalpha | adversarial``: their flags, from
:class:`MnistSettings` (and the experiment's own settings); ``--quick`` sets the quick values of
the settings whose flags were not given."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..core import add_flags, add_run_flags, command_settings, device_scope, int_list, positive_int
from .alpha_settings import ATTACK_QUICK, BBALPHA_QUICK, AlphaSettings, AttackSettings
from .methods import METHODS
from .settings import OOD_QUICK, QUICK, MnistSettings

__all__ = ["add_mnist"]

DATA = "mnist/, fashion-mnist/, notmnist/"


def _settings(args: argparse.Namespace, cls: type = MnistSettings, quick: dict | None = None) -> Any:
    """``cls`` from the flags; with ``--quick``, the quick values of the fields not given."""
    return command_settings(cls, args, QUICK if quick is None else quick)


def _on_device(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """``run`` with its networks and images on ``--device``."""

    def on_device(args: argparse.Namespace) -> int:
        with device_scope(args.device):
            return run(args)

    return on_device


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
        _settings(args, quick=OOD_QUICK),
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


def _bbalpha(args: argparse.Namespace) -> int:
    from .alpha_figures import mean_se
    from .bbalpha import run_bbalpha

    settings = _settings(args, quick=BBALPHA_QUICK)
    results = run_bbalpha(
        settings,
        _settings(args, AlphaSettings, BBALPHA_QUICK),
        Path(args.out),
        data_dir=args.data_dir,
        progress=not args.quiet,
    )
    for name in ("mlp", "cnn"):
        for alpha, scores in results.get(name, {}).items():
            (acc, acc_se), (ll, ll_se) = mean_se(scores["accuracy"]), mean_se(scores["test_ll"])
            print(f"{name} α={alpha}: accuracy {acc:.4f} ± {acc_se:.4f}, test LL {ll:.4f} ± {ll_se:.4f}")
    return 0


def _adversarial(args: argparse.Namespace) -> int:
    from .adversarial import run_adversarial

    results = run_adversarial(
        _settings(args, quick=ATTACK_QUICK),
        _settings(args, AttackSettings, ATTACK_QUICK),
        Path(args.out),
        data_dir=args.data_dir,
        progress=not args.quiet,
    )
    for name, r in results["untargeted"].items():
        pairs = ", ".join(f"{e:g}: {acc:.2f}" for e, acc in zip(r["eta"], r["accuracy"], strict=True))
        print(f"{name} (clean {results['clean'][name]['accuracy']:.4f}) accuracy by η: {pairs}")
    return 0


def _common(parser: argparse.ArgumentParser, out: str, quick: dict, skip: tuple = ("ensemble_size",)) -> None:
    add_run_flags(parser, out, "results.json and the figures", f"{quick} unless given", data=DATA)
    add_flags(parser, MnistSettings, skip=skip)


def add_mnist(sub: argparse._SubParsersAction) -> None:
    mnist = sub.add_parser(
        "mnist", help="the MNIST experiments: ood, rotated, concrete, bbalpha, adversarial"
    )
    experiments = mnist.add_subparsers(dest="experiment", required=True)
    ood = experiments.add_parser(
        "ood", help="OOD and misclassification detection, calibration: five methods on LeNet"
    )
    _common(ood, "results/mnist-ood", OOD_QUICK, skip=())
    ood.add_argument(
        "--methods", type=_methods, default=METHODS, help=f"comma-separated (default: {','.join(METHODS)})"
    )
    ood.set_defaults(func=_on_device(_ood))
    rotated = experiments.add_parser("rotated", help="paper 000 Fig. 4: a rotated digit 1 under MC dropout")
    _common(rotated, "results/mnist-rotated", QUICK)
    rotated.set_defaults(func=_on_device(_rotated))
    concrete = experiments.add_parser("concrete", help="paper 001 Figs. 5-6: converged Concrete p per layer")
    _common(
        concrete, "results/mnist-concrete", QUICK | {"sizes": "1000,5000", "widths": "512", "min_steps": 1000}
    )
    concrete.add_argument(
        "--sizes",
        type=int_list,
        default=None,
        help="training set sizes (default 1000,5000,10000,25000,50000)",
    )
    concrete.add_argument(
        "--widths",
        type=int_list,
        default=None,
        help="hidden units per layer (default 128,256,512,1024)",
    )
    concrete.add_argument(
        "--min-steps", type=positive_int, default=None, help="fewest steps of a run (default 2000)"
    )
    concrete.set_defaults(func=_on_device(_concrete))
    bbalpha = experiments.add_parser("bbalpha", help="paper 003 Figs. 4-5: BB-α on the 2x100 MLP and a CNN")
    _common(bbalpha, "results/mnist-bbalpha", BBALPHA_QUICK)
    add_flags(bbalpha, AlphaSettings)
    bbalpha.set_defaults(func=_on_device(_bbalpha))
    attack = experiments.add_parser(
        "adversarial", help="paper 003 Figs. 6-7: gradient-sign attacks and detection"
    )
    _common(attack, "results/mnist-adversarial", ATTACK_QUICK, skip=("ensemble_size", "num_samples"))
    add_flags(attack, AttackSettings)
    attack.set_defaults(func=_on_device(_adversarial))
