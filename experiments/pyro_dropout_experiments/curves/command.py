"""``pyro-dropout co2``, ``solar`` and ``synthetic``: their flags, from :class:`CurveSettings`;
``--quick`` sets the quick values of the settings whose flags were not given."""

from __future__ import annotations

import argparse
from functools import partial
from pathlib import Path
from typing import Any

from ..core import add_flags, add_run_flags, command_settings, int_list, positive_int
from .settings import QUICK, CurveSettings

__all__ = ["add_co2", "add_solar", "add_synthetic"]

# the synthetic study's quick setting: narrower networks, three sizes (about 5 minutes on 2 cores)
SYNTHETIC_QUICK: dict[str, Any] = {"width": 128, "steps": 2000, "num_samples": 200}
SYNTHETIC_QUICK_SIZES = (10, 100, 1000)


def _co2(args: argparse.Namespace) -> int:
    from .co2 import run_co2

    results = run_co2(
        command_settings(CurveSettings, args, QUICK), Path(args.out), args.data_dir, not args.quiet
    )
    _print_models(results, "sd_ratio", "after_1991", "far / inside the training range")
    return 0


def _solar(args: argparse.Namespace) -> int:
    from .solar import run_solar

    results = run_solar(
        command_settings(CurveSettings, args, QUICK), Path(args.out), args.data_dir, not args.quiet
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
    from .synthetic import SIZES, run_synthetic

    sizes = args.sizes or (SYNTHETIC_QUICK_SIZES if args.quick else SIZES)
    s = command_settings(CurveSettings, args, SYNTHETIC_QUICK)
    results = run_synthetic(s, Path(args.out), sizes, args.repeats, args.batch_size, not args.quiet)
    for i, n in enumerate(results["sizes"]):
        p = ", ".join(f"{v[i]:.3f}" for v in results["p"].values())
        epistemic, aleatoric, predictive = (results[k][i] for k in ("epistemic", "aleatoric", "predictive"))
        sds = f"epistemic {epistemic:.3f}  aleatoric {aleatoric:.3f}  predictive {predictive:.3f}"
        print(f"N = {n:6d}: {sds}  p {p}")
    return 0


def _common(parser: argparse.ArgumentParser, name: str, quick: str, data: str | None) -> None:
    add_run_flags(parser, f"results/{name}", f"results.json and {name}.png", quick, device=False, data=data)


def add_co2(sub: argparse._SubParsersAction) -> None:
    co2 = sub.add_parser("co2", help="paper 000 Figs. 2-3: extrapolating Mauna Loa CO2 (MC dropout, GP)")
    _common(co2, "co2", f"{QUICK} unless given", "co2/")
    add_flags(co2, CurveSettings)
    co2.set_defaults(func=_co2)


def add_solar(sub: argparse._SubParsersAction) -> None:
    solar = sub.add_parser("solar", help="paper 000 appendix D.1: interpolating solar irradiance gaps")
    _common(solar, "solar", f"{QUICK} unless given", "solar/")
    add_flags(solar, CurveSettings)
    solar.set_defaults(func=_solar)


def add_synthetic(sub: argparse._SubParsersAction) -> None:
    from .synthetic import SIZES, SYNTHETIC

    synthetic = sub.add_parser(
        "synthetic", help="paper 001 Fig. 1: Concrete dropout's uncertainties and p against the data size"
    )
    quick = f"{SYNTHETIC_QUICK}, sizes {','.join(map(str, SYNTHETIC_QUICK_SIZES))} unless given"
    _common(synthetic, "synthetic", quick, None)
    add_flags(synthetic, CurveSettings, defaults=SYNTHETIC)  # paper 001's network: 3 layers
    synthetic.add_argument(
        "--sizes",
        type=partial(int_list, minimum=2),
        default=None,
        help=f"data set sizes (default {','.join(map(str, SIZES))})",
    )
    synthetic.add_argument(
        "--repeats", type=positive_int, default=3, help="data sets of each size (default 3)"
    )
    synthetic.add_argument(
        "--batch-size", type=positive_int, default=128, help="minibatch size (default 128)"
    )
    synthetic.set_defaults(func=_synthetic)
