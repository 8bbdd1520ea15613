"""``pyro-dropout dynamics``: its flags, from :class:`DynamicsSettings`."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..core import add_flags, add_run_flags, command_settings, device_scope
from .settings import QUICK, DynamicsSettings

__all__ = ["add_dynamics"]


def _dynamics(args: argparse.Namespace) -> int:
    from .run import run_dynamics

    s = command_settings(DynamicsSettings, args, QUICK)
    with device_scope(args.device):  # the networks and tensors it makes
        results = run_dynamics(s, Path(args.out), not args.quiet)
    for agent, runs in results["runs"].items():
        for seed, run in runs.items():
            first, last = run["episodes"][0], run["episodes"][-1]
            rates = ", ".join(f"{p:.3f}" for p in last["rates"])
            pairs = zip(first["epistemic_sd"], last["epistemic_sd"], strict=True)
            sd = ", ".join(f"{a:.2g}→{b:.2g}" for a, b in pairs)
            late = [r["return"] for r in run["episodes"]][-5:]
            print(f"{agent} (seed {seed}): p per layer {rates}; epistemic sd of the changes {sd}; "
                  f"mean return of the last five episodes {sum(late) / len(late):.0f}")  # fmt: skip
    return 0


def add_dynamics(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "dynamics", help="paper 001 §4.5: Concrete dropout in a cart-pole dynamics model (gymnasium)"
    )
    add_run_flags(parser, "results/dynamics", "results.json and dynamics.png", f"{QUICK} unless given")
    add_flags(parser, DynamicsSettings)
    parser.set_defaults(func=_dynamics)
