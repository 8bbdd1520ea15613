"""``pyro-dropout co2``, ``solar`` and ``synthetic``: their flags, from :class:`CurveSettings`;
``--quick`` sets the quick values of the settings not given on the command line."""

from __future__ import annotations

import argparse
from functools import partial
from pathlib import Path
from typing import Any

from ..core import add_flags, add_threads, from_args, int_list, unless_given, use_threads
from .settings import QUICK, CurveSettings

__all__ = ["add_curves"]

# the synthetic study's quick setting: narrower networks, three sizes (about 5 minutes on 2 cores)
SYNTHETIC_QUICK: dict[str, Any] = {"width": 128, "steps": 2000, "num_samples": 200}
SYNTHETIC_QUICK_SIZES = (10, 100, 1000)


def _settings(args: argparse.Namespace, *changes: dict[str, Any]) -> CurveSettings:
    """The flags given, and for the settings not given, ``changes`` applied in order (and the
    CPU threads set, if given)."""
    use_threads(args)
    return unless_given(from_args(CurveSettings, args), *changes)


def _co2(args: argparse.Namespace) -> int:
    from .co2 import run_co2

    results = run_co2(
        _settings(args, QUICK if args.quick else {}), Path(args.out), args.data_dir, not args.quiet
    )
    _print_models(results, "sd_ratio", "after_1991", "far / inside the training range")
    return 0


def _solar(args: argparse.Namespace) -> int:
    from .solar import run_solar

    results = run_solar(
        _settings(args, QUICK if args.quick else {}), Path(args.out), args.data_dir, not args.quiet
    )
    _print_models(results, "sd_ratio", "gaps", "in the gaps / outside")
    return 0


def _print_models(results: dict[str, Any], ratio: str, scored: str, what: str) -> None:
    for name, model in results["models"].items():
        score = model[scored]
        print(
            f"{name:20s} sd {what}: {model[ratio]:6.2f}   "
            f"RMSE {score['rmse']:8.3f}   test LL {score['test_ll']:8.3f}  ({scored})"
        )


def _synthetic(args: argparse.Namespace) -> int:
    from .synthetic import SIZES, SYNTHETIC, run_synthetic

    quick = SYNTHETIC_QUICK if args.quick else {}
    sizes = args.sizes or (SYNTHETIC_QUICK_SIZES if args.quick else SIZES)
    s = _settings(args, SYNTHETIC, quick)
    results = run_synthetic(s, Path(args.out), sizes, args.repeats, args.batch_size, not args.quiet)
    for i, n in enumerate(results["sizes"]):
        p = ", ".join(f"{v[i]:.3f}" for v in results["p"].values())
        epistemic, aleatoric, predictive = (results[k][i] for k in ("epistemic", "aleatoric", "predictive"))
        sds = f"epistemic {epistemic:.3f}  aleatoric {aleatoric:.3f}  predictive {predictive:.3f}"
        print(f"N = {n:6d}: {sds}  p {p}")
    return 0


def _common(parser: argparse.ArgumentParser, out: str, quick: str) -> None:
    parser.add_argument("--out", default=out, help=f"results.json and the figure go here (default: {out})")
    parser.add_argument(
        "--data-dir", default=None, help="folder holding co2/ and solar/ (default: $PYRO_DROPOUT_DATA)"
    )
    parser.add_argument(
        "--quick", action="store_true", help=f"a first try, under 10 minutes on 2 cores: {quick}"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    add_threads(parser)
    add_flags(parser, CurveSettings)


def add_curves(sub: argparse._SubParsersAction) -> None:
    co2 = sub.add_parser("co2", help="paper 000 Figs. 2-3: extrapolating Mauna Loa CO2 (MC dropout, GP)")
    _common(co2, "results/co2", f"{QUICK} unless given")
    co2.set_defaults(func=_co2)
    solar = sub.add_parser("solar", help="paper 000 appendix D.1: interpolating solar irradiance gaps")
    _common(solar, "results/solar", f"{QUICK} unless given")
    solar.set_defaults(func=_solar)
    synthetic = sub.add_parser(
        "synthetic", help="paper 001 Fig. 1: Concrete dropout's uncertainties and p against the data size"
    )
    _common(synthetic, "results/synthetic", f"{SYNTHETIC_QUICK}, sizes {SYNTHETIC_QUICK_SIZES} unless given")
    synthetic.add_argument(
        "--sizes",
        type=partial(int_list, minimum=2),
        default=None,
        help="data set sizes (default 10,25,50,100,1000,10000)",
    )
    synthetic.add_argument("--repeats", type=int, default=3, help="data sets of each size (default 3)")
    synthetic.add_argument("--batch-size", type=int, default=128, help="minibatch size (default 128)")
    synthetic.set_defaults(func=_synthetic)
