"""``pyro-dropout lm-uncertainty``: its flags, from :class:`LMSettings`."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..core import add_flags, add_run_flags, command_settings, device_scope
from .settings import QUICK, LMSettings

__all__ = ["add_lm"]


def _lm(args: argparse.Namespace) -> int:
    from .run import run_lm

    s = command_settings(LMSettings, args, QUICK)
    with device_scope(args.device):
        results = run_lm(s, Path(args.out), not args.quiet)
    for variant, runs in results["runs"].items():
        for seed, run in runs.items():
            other = run["auroc"]["other domain"]["sequence"]["mutual_information"]
            mixed = run["auroc"]["shuffled"]["sequence"]["mutual_information"]
            rates = ", ".join(f"{p:.3f}" for p in run["rates"].values())
            head = f"{variant} (seed {seed}): perplexity {run['perplexity']:.2f}, ECE {run['ece']:.3f}"
            print(
                f"{head}, sequence MI AUROC {other:.3f} (other domain), {mixed:.3f} (shuffled); rates {rates}"
            )
    return 0


def add_lm(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "lm-uncertainty",
        help="MC dropout on a LoRA-fine-tuned character language model: perplexity, ECE, OOD, learned rates",
    )
    add_run_flags(parser, "results/lm", "results.json and lm.png", f"{QUICK} unless given")
    add_flags(parser, LMSettings)
    parser.set_defaults(func=_lm)
