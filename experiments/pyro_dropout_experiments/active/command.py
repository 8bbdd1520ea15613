"""``pyro-dropout active-learning``: its flags, from :class:`ActiveSettings`."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..core import add_flags, add_run_flags, command_settings, device_scope
from .settings import QUICK, ActiveSettings

__all__ = ["add_active"]


def _active(args: argparse.Namespace) -> int:
    from .figure import active_table
    from .run import run_active

    s = command_settings(ActiveSettings, args, QUICK)
    with device_scope(args.device):  # the networks and tensors it makes
        results = run_active(s, Path(args.out), args.data_dir, not args.quiet)
    print(active_table(results))
    return 0


def add_active(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "active-learning",
        help="Gal, Islam & Ghahramani 2017: MNIST images acquired by BALD, variation ratios, "
        "max entropy, mean std and at random (--copies 3: Repeated MNIST, BatchBALD)",
    )
    add_run_flags(
        parser,
        "results/active-learning",
        "results.json and active_learning.png",
        f"{QUICK} unless given",
        data="mnist/",
    )
    add_flags(parser, ActiveSettings)
    parser.set_defaults(func=_active)
