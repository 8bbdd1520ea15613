"""``pyro-dropout rl``: its flags, from :class:`RLSettings`."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..core import add_flags, add_run_flags, command_settings, device_scope
from .settings import QUICK, RLSettings

__all__ = ["add_rl"]


def _rl(args: argparse.Namespace) -> int:
    from .run import run_rl

    s = command_settings(RLSettings, args, QUICK)
    with device_scope(args.device):  # the networks and tensors it makes
        results = run_rl(s, Path(args.out), not args.quiet)
    for policy, runs in results["runs"].items():
        late = [r["late_return"] for r in runs.values() if r["late_return"] is not None]
        reached = [r["batches_to_threshold"] for r in runs.values()]
        mean = f"{sum(late) / len(late):.0f}" if late else "-"
        print(f"{policy}: mean return over the last fifth {mean}; batches to a mean of 195: {reached}")
    return 0


def add_rl(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "rl", help="paper 000 §5.4: a Q-network with dropout, Thompson sampling against ε-greedy"
    )
    add_run_flags(parser, "results/rl", "results.json and rl.png", f"{QUICK} unless given")
    add_flags(parser, RLSettings)
    parser.set_defaults(func=_rl)
