"""``pyro-dropout bandit``: its flags, from :class:`BanditSettings`."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..core import add_flags, add_run_flags, command_settings, device_scope
from .settings import QUICK, BanditSettings

__all__ = ["add_bandit"]


def _bandit(args: argparse.Namespace) -> int:
    from .run import run_bandit

    s = command_settings(BanditSettings, args, QUICK)
    with device_scope(args.device):  # the networks and tensors it makes
        results = run_bandit(s, Path(args.out), not args.quiet)
    for delta, entry in results["deltas"].items():
        cells = []
        for policy, r in entry.items():
            final = sum(r["final"]) / len(r["final"])
            norm = (
                f" ({sum(r['normalised']) / len(r['normalised']):.1f} of uniform's 100)"
                if "normalised" in r
                else ""
            )
            cells.append(f"{policy} {final:.0f}{norm}")
        print(f"δ = {delta}: cumulative regret " + ", ".join(cells))
    return 0


def add_bandit(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "bandit", help="paper 000 §5.4: Thompson sampling with MC dropout, the wheel bandit"
    )
    add_run_flags(parser, "results/bandit", "results.json and bandit.png", f"{QUICK} unless given")
    add_flags(parser, BanditSettings)
    parser.set_defaults(func=_bandit)
