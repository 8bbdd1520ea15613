"""Peak memory of ``evaluate()`` (scores streamed chunk by chunk) against ``predict()`` (every draw kept).

Run: python benchmarks/evaluate_memory.py [--draws 20000] [--points 10000] [--chunk 100] [--quick]

The workload: a trained-size 8-50-1 MC-dropout regression network (``MLP`` + ``DropoutGuide``),
``T`` draws at ``N`` test points. Each measurement runs in a fresh process and reports that
process's peak resident memory (``ru_maxrss``) minus its resident memory just before the call,
so the figures are what the call itself added. Printed: MB for ``predict`` alone (the returned
draws are ``T x N`` per kept quantity), for ``predict`` followed by ``regression_report`` on the
held draws (what ``evaluate`` did before it streamed), and for ``evaluate``; and the ratios
evaluate / predict and evaluate / held. The benchmark checks its result: the held report and
``evaluate`` give the same test log-likelihood to 1e-6 (the same draws, the same seed).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine, rss_mb, write


def child(kind: str, draws: int, points: int, chunk: int) -> None:
    """One measurement in this process: print JSON {added_mb, test_ll, seconds}."""
    import time

    import pyro

    from pyro_dropout import DropoutGuide, evaluate, predict
    from pyro_dropout.metrics import regression_report
    from pyro_dropout.nn import MLP

    torch.set_num_threads(1)
    pyro.set_rng_seed(0)
    x, y = torch.randn(points, 8), torch.randn(points)
    model = MLP(8, hidden=(50,), tau=4.0)
    guide = DropoutGuide(model, dropout=0.1)
    guide(x[:2], y[:2])  # create the parameters
    before = rss_mb()
    start = time.perf_counter()
    pyro.set_rng_seed(1)
    if kind in ("predict", "held"):
        pred = predict(model, guide, x, y, num_samples=draws, chunk_size=chunk, return_sites=())
        test_ll = regression_report(pred).test_ll if kind == "held" else float("nan")
    else:
        test_ll = evaluate(model, guide, x, y, num_samples=draws, chunk_size=chunk).test_ll
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KB on Linux
    print(json.dumps({"added_mb": peak - before, "test_ll": test_ll, "seconds": seconds}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=20_000)
    parser.add_argument("--points", type=int, default=10_000)
    parser.add_argument("--chunk", type=int, default=100)
    parser.add_argument("--quick", action="store_true", help="T = 2,000 x N = 2,000")
    parser.add_argument("--device", default="cpu", help="cpu only: host memory is measured")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    draws, points = (2000, 2000) if args.quick else (args.draws, args.points)
    if args.child:
        child(args.child, draws, points, args.chunk)
        return
    out = {}
    for kind in ("predict", "held", "evaluate"):
        cmd = [sys.executable, __file__, "--child", kind, "--draws", str(draws), "--points", str(points)]
        run = subprocess.run([*cmd, "--chunk", str(args.chunk)], capture_output=True, text=True, check=True)
        out[kind] = json.loads(run.stdout.strip().splitlines()[-1])
        print(f"{kind:>9s}: +{out[kind]['added_mb']:8.1f} MB peak, {out[kind]['seconds']:6.1f} s")
    ratio = out["evaluate"]["added_mb"] / out["predict"]["added_mb"]
    held_ratio = out["evaluate"]["added_mb"] / out["held"]["added_mb"]
    chunk_mb = args.chunk * points * 50 * 4 / 2**20
    print(f"T = {draws} x N = {points}, chunk {args.chunk}: peak memory evaluate / predict = {ratio:.3f}")
    print(f"evaluate / (predict + report on the held draws) = {held_ratio:.3f}")
    kept_mb = draws * points * 4 / 2**20
    print(f"(one chunk's hidden activations are {chunk_mb:.0f} MB; the kept means alone {kept_mb:.0f} MB)")
    same = abs(out["evaluate"]["test_ll"] - out["held"]["test_ll"]) <= 1e-6 * max(
        1.0, abs(out["held"]["test_ll"])
    )
    if not same:
        raise SystemExit(f"the two test log-likelihoods differ: {out}")
    name = f"evaluate_memory_cpu{'_quick' if args.quick else ''}"
    write(
        name,
        {
            "machine": machine(torch.device("cpu")),
            "draws": draws,
            "points": points,
            "chunk": args.chunk,
            "results": out,
            "ratio": ratio,
        },
    )


if __name__ == "__main__":
    main()
