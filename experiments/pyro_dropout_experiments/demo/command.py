"""``pyro-dropout demo``: its flags, from :class:`DemoSettings`."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..core import add_flags, add_run_flags, command_settings
from .settings import QUICK, DemoSettings

__all__ = ["add_demo"]


def _demo(args: argparse.Namespace) -> int:
    from .run import run_demo

    run_demo(Path(args.out), command_settings(DemoSettings, args, QUICK))
    return 0


def add_demo(sub: argparse._SubParsersAction) -> None:
    demo = sub.add_parser("demo", help="train MC dropout on built-in 1-d data; print figures, write a plot")
    add_run_flags(demo, "results/demo", "demo.png", f"{QUICK} unless given", device=False)
    add_flags(demo, DemoSettings)
    demo.set_defaults(func=_demo)
