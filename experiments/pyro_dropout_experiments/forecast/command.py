"""``pyro-dropout forecast``: its flags, from :class:`ForecastSettings`."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..core import add_flags, add_run_flags, command_settings, device_scope
from .settings import QUICK, ForecastSettings

__all__ = ["add_forecast"]


def _forecast(args: argparse.Namespace) -> int:
    from .run import run_forecast

    settings = command_settings(ForecastSettings, args, QUICK)
    with device_scope(args.device):  # the networks and tensors it makes
        r = run_forecast(settings, Path(args.out), args.data_dir, not args.quiet)
    sc = r["scores"]
    print(f"predictive sd: {r['sd_one_year']:.2f} ppm a year ahead, {r['sd_end']:.2f} ppm at the horizon")
    print(f"RMSE {sc['rmse']:.2f} ppm, test LL {sc['test_ll']:.2f}, 95% band covers {sc['coverage_95']:.0%} "
          f"of the {sc['readings']} readings after the training end")  # fmt: skip
    return 0


def add_forecast(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("forecast", help="an LSTM with variational dropout forecasting CO2")
    add_run_flags(
        parser, "results/forecast", "results.json and forecast.png", f"{QUICK} unless given", data="co2/"
    )
    add_flags(parser, ForecastSettings)
    parser.set_defaults(func=_forecast)
