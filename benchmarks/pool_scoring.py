"""Scoring an active-learning pool: the same T draws for every row, streamed, against the raw loop.

Run: python benchmarks/pool_scoring.py [--rows 100000] [--draws 20] [--quick] [--device cpu]

A pool of MNIST-sized rows (784 features, random: the time does not depend on the values) is
scored batch by batch with T draws of a 784-512-512-10 network with dropout 0.5 before each
weight layer, two ways, interleaved:

* ``library``: :class:`pyro_dropout.active.PoolDraws` (the guide's weights drawn once, seeded, the
  same T functions for every row), each batch's draws ``[T, B, 10]`` turned into BALD scores and
  only the scores kept;
* ``raw``: the same network as ``torch.nn`` modules with its dropout active, T passes per batch
  (one mask per element: the network's own loop of dropout-active passes), the same scores.

The ratio is the library's time over raw's. The library's peak resident memory, measured in a
fresh process (``--child``), is stated beside the pool's size: it streams, so it is bounded by a
batch and the kept weights, not by the pool.
"""

from __future__ import annotations

import argparse
import itertools
import resource
import subprocess
import sys
import time
from pathlib import Path

import pyro
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import interleaved_best, machine, pick_device, rss_mb, write

from pyro_dropout import DropoutGuide
from pyro_dropout.active import PoolDraws
from pyro_dropout.metrics import bald
from pyro_dropout.nn import MLP

SIZES, P, BATCH = (784, 512, 512, 10), 0.5, 1000


def library_scorer(device: torch.device, draws: int, pool_example: torch.Tensor):
    pyro.clear_param_store()
    model = MLP(SIZES[0], SIZES[-1], hidden=SIZES[1:-1], likelihood="categorical").to(device)
    guide = DropoutGuide(model, dropout=P)
    guide(pool_example[:2], torch.zeros(2, dtype=torch.long, device=device))
    kept = PoolDraws(model, guide, pool_example, draws, seed=0)
    return lambda x: bald(kept.probs(x))


def raw_scorer(device: torch.device, draws: int):
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(itertools.pairwise(SIZES)):
        layers += [nn.Dropout(P), nn.Linear(a, b)] + ([nn.ReLU()] if i < len(SIZES) - 2 else [])
    net = nn.Sequential(*layers).to(device).train()

    def score(x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return bald(torch.stack([net(x).softmax(-1) for _ in range(draws)]))

    return score


def pool_pass(score, rows: int, device: torch.device):
    g = torch.Generator().manual_seed(1)
    batches = [
        torch.rand(min(BATCH, rows - i), SIZES[0], generator=g).to(device) for i in range(0, rows, BATCH)
    ]

    def run() -> torch.Tensor:
        return torch.cat([score(x) for x in batches])

    return run


def child(rows: int, draws: int) -> None:
    """Score a pool of ``rows`` in this fresh process, one batch made at a time; print the peak RSS."""
    device = torch.device("cpu")
    g = torch.Generator().manual_seed(1)
    score = library_scorer(device, draws, torch.rand(4, SIZES[0], generator=g))
    before = rss_mb()
    scores = [score(torch.rand(min(BATCH, rows - i), SIZES[0], generator=g)) for i in range(0, rows, BATCH)]
    assert len(torch.cat(scores)) == rows
    print(f"{before:.1f} {_high_water_mb():.1f}")


def _high_water_mb() -> float:
    """This process's peak resident set, MB: ``VmHWM`` (of this program's memory only; the
    ``ru_maxrss`` of a child keeps its parent's peak across ``exec`` on Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return float(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--draws", type=int, default=20)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--quick", action="store_true", help="2,000 rows, 3 blocks")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    rows, blocks = (2_000, 3) if args.quick else (args.rows, 3)
    if args.child:
        return child(rows, args.draws)
    device = pick_device(args.device)
    example = torch.rand(4, SIZES[0], device=device)
    runners = {
        "library": pool_pass(library_scorer(device, args.draws, example), rows, device),
        "raw": pool_pass(raw_scorer(device, args.draws), rows, device),
    }
    start = time.perf_counter()
    best = interleaved_best(runners, device, 1, blocks, warmup=1)
    flags = ["--child", "--draws", str(args.draws)] + (["--quick"] if args.quick else ["--rows", str(rows)])
    out = subprocess.run([sys.executable, __file__, *flags], capture_output=True, text=True, check=True)
    before, peak = (float(v) for v in out.stdout.split())
    row = {"rows": rows, "draws": args.draws, "library_s": best["library"], "raw_s": best["raw"]}
    row |= {"library_vs_raw": best["library"] / best["raw"], "rss_before_mb": before, "rss_peak_mb": peak}
    print(
        f"pool of {rows} rows, T = {args.draws}: library {best['library']:.2f} s, raw {best['raw']:.2f} s "
        f"({row['library_vs_raw']:.2f}x); peak RSS {peak:.0f} MB ({before:.0f} MB before scoring); "
        f"{time.perf_counter() - start:.0f} s in all"
    )
    name = f"pool_scoring_{device.type}" + ("_quick" if args.quick else "")
    write(name, {"machine": machine(device), "date": time.strftime("%Y-%m-%d"), "rows": row})


if __name__ == "__main__":
    main()
