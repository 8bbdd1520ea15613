"""Probe the library and the commands with bad, extreme and hostile inputs; count how each ends.

    python tools/probe_inputs.py [--verbose] [--only CATEGORY] [--skip CATEGORY]

Each probe calls one entry point with one bad or extreme argument: the first wave
(``probing/library.py``: DropoutGuide, the losses, SVI and CompiledSVI steps, predict, evaluate,
the layers and models, the metrics) and the surfaces added since (``probing/surfaces.py``:
recurrent layers, attacks, policies, SVIModule, evaluate's labels, ArviZ export, image files;
``probing/graphs.py``: recorded losses; ``probing/newest.py``: MCDropout, conformal prediction,
K-fold, CompiledSVI's optimizer settings, saved states and written files;
``probing/commands.py``: the ``pyro-dropout`` commands, their results files and flags;
``probing/round4.py``: active learning, the in-between check, saved states, K-fold after a fit, and
the fast paths' bad uses, each step compared with the eager one). Each is classified as:

* ``handled``: it returned, and the result passed the probe's check (finite, documented shape);
* ``unsafe``: whatever its end, results were lost or a file outside ``--out`` was written;
* ``clear error``: a ValueError/TypeError naming the argument (or site, or file) at fault;
* ``silent wrong``: it returned, but the result failed the check (NaN, a wrong shape...);
* ``unnamed error``: a ValueError/TypeError that names nothing the probe expects;
* ``raw traceback``: any other exception (ZeroDivisionError, RuntimeError from torch...).

The last four are defects; ``tests/test_tools.py`` runs this and requires none.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

import pyro

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the probing package beside this script

from probing.base import DEFECTS, OUTCOMES, Probe, classify
from probing.commands import command_probes
from probing.graphs import graph_probes
from probing.library import guide_probes, layer_probes, metric_probes, predict_probes, step_probes
from probing.newest import newest_probes
from probing.round4 import round4_probes
from probing.surfaces import surface_probes


def all_probes() -> list[Probe]:
    first = guide_probes() + step_probes() + predict_probes() + layer_probes() + metric_probes()
    return first + surface_probes() + graph_probes() + newest_probes() + command_probes() + round4_probes()


@pyro.settings.context(module_local_params=True)  # the probes hold several fitted guides at once
def run(verbose: bool = False, only: list[str] | None = None, skip: list[str] | None = None) -> Counter:
    counts: Counter = Counter()
    for probe in all_probes():
        if (only and probe.category not in only) or (skip and probe.category in skip):
            continue
        outcome, detail = classify(probe)
        counts[outcome] += 1
        counts[(probe.category, outcome)] += 1
        if verbose or outcome in DEFECTS:
            print(f"[{outcome}] {probe.category}: {probe.what}: {detail[:300]}")
    return counts


def main(argv: list[str] | None = None) -> Counter:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--verbose", action="store_true", help="print every probe, not only the defects")
    parser.add_argument("--only", action="append", help="probe only this category (repeatable)")
    parser.add_argument("--skip", action="append", help="leave this category out (repeatable)")
    args = parser.parse_args(argv)
    pyro.enable_validation(True)
    counts = run(args.verbose, args.only, args.skip)
    total = sum(v for k, v in counts.items() if isinstance(k, str))
    print(f"{total} probes: " + ", ".join(f"{counts[o]} {o}" for o in OUTCOMES))
    for category in sorted({k[0] for k in counts if isinstance(k, tuple)}):
        print(
            f"  {category}: "
            + ", ".join(f"{counts[(category, o)]} {o}" for o in OUTCOMES if counts[(category, o)])
        )
    return counts


if __name__ == "__main__":
    main()
