"""MC-dropout prediction: speed against an equal-FLOP batched matrix product, and peak memory.

Run: python benchmarks/predictive.py [--device auto|cpu|cuda] [--quick]

1. Speed: T draws on N points for the UCI net (13-50-1) with ``predict`` (masks, biases,
   ReLU, likelihood moments) against the batched matrix products of the same FLOP count,
   ``x @ W1[t].T`` and ``h @ W2[t].T`` for all t (the hardware's limit for this work).
2. Memory: the peak working memory of ``predict`` as T grows, chunked (chunk_size=100) and
   unchunked; each configuration runs in a fresh process (peak RSS on CPU, peak allocated
   on CUDA), minus the memory before the call and the returned draws.
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
from common import best_time, machine, pick_device, write

from pyro_dropout import DropoutGuide, predict
from pyro_dropout.nn import MLP


def uci_model(device: torch.device, n: int) -> tuple[MLP, DropoutGuide, torch.Tensor]:
    torch.manual_seed(0)
    x = torch.randn(n, 13, device=device)
    model = MLP(13, hidden=(50,), tau=1.0).to(device)
    guide = DropoutGuide(model, dropout=0.05)
    guide(x)
    return model, guide, x


def equal_flop_matmul(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    h = torch.matmul(x, w1.transpose(-1, -2))  # [T, N, 50]
    return torch.matmul(h, w2.transpose(-1, -2))  # [T, N, 1]


def speed(device: torch.device, t: int, n: int, chunk: int | None) -> dict:
    model, guide, x = uci_model(device, n)
    w1 = torch.randn(t, 50, 13, device=device)
    w2 = torch.randn(t, 1, 50, device=device)
    baseline = best_time(lambda: equal_flop_matmul(x, w1, w2), device)
    ours = best_time(
        lambda: predict(model, guide, x, num_samples=t, chunk_size=chunk, return_sites=["mean"]), device
    )
    flops = 2 * t * n * (13 * 50 + 50 * 1)
    pred = predict(model, guide, x, num_samples=t, chunk_size=chunk, return_sites=["mean"])
    assert pred["mean"].shape == (t, n) and torch.isfinite(pred["mean"]).all()
    return {
        "T": t,
        "N": n,
        "chunk_size": chunk,
        "gflop": flops / 1e9,
        "matmul_seconds": baseline,
        "predict_seconds": ours,
        "ratio": ours / baseline,
        "matmul_gflops_per_s": flops / baseline / 1e9,
    }


def child(device: torch.device, t: int, n: int, chunk: int | None) -> None:
    """Runs in a fresh process: one predict call, peak memory above the baseline."""
    model, guide, x = uci_model(device, n)
    predict(model, guide, x, num_samples=2, chunk_size=None, return_sites=["mean"])  # warm up
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
    else:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    pred = predict(model, guide, x, num_samples=t, chunk_size=chunk, return_sites=["mean"])
    if device.type == "cuda":
        peak = torch.cuda.max_memory_allocated()
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    output = sum(
        v.numel() * v.element_size() for g in (pred.samples, pred.means, pred.variances) for v in g.values()
    )
    print(
        json.dumps(
            {
                "T": t,
                "chunk_size": chunk,
                "peak_mb": (peak - before) / 2**20,
                "output_mb": output / 2**20,
                "working_mb": (peak - before - output) / 2**20,
            }
        )
    )


def memory(device: torch.device, ts: list[int], n: int, unchunked_max: int) -> list[dict]:
    rows = []
    for chunk in (100, None):
        for t in ts:
            if chunk is None and t > unchunked_max:
                continue
            cmd = [sys.executable, __file__, "--child", str(t), str(n), str(chunk), "--device", str(device)]
            out = (
                subprocess.run(cmd, check=True, capture_output=True, text=True)
                .stdout.strip()
                .splitlines()[-1]
            )
            rows.append(json.loads(out))
            print(
                f"  memory  T={t:5d} chunk={chunk!s:>4}: working {rows[-1]['working_mb']:8.1f} MB "
                f"(output {rows[-1]['output_mb']:.1f} MB)"
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--quick", action="store_true", help="smaller sizes (for a smoke test)")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    device = pick_device(args.device)
    if args.child:
        t, n, chunk = int(args.child[0]), int(args.child[1]), args.child[2]
        child(device, t, n, None if chunk == "None" else int(chunk))
        return
    t, n = (100, 1000) if args.quick else (1000, 10_000)
    print(f"predictive benchmark on {device}")
    # memory first, in fresh child processes, while this process is still small
    ts = [50, 200, 800] if args.quick else [250, 1000, 4000, 16000]
    mem = memory(device, ts, n, unchunked_max=ts[-2] // 2)
    rows = [speed(device, t, n, chunk) for chunk in (100, 250, None)]
    for r in rows:
        print(
            f"  speed   T={r['T']} N={r['N']} chunk={r['chunk_size']!s:>4}: "
            f"predict {r['predict_seconds']:.3f} s, equal-FLOP matmul {r['matmul_seconds']:.3f} s, "
            f"ratio {r['ratio']:.2f}"
        )
    write(
        f"predictive_{device.type}" + ("_quick" if args.quick else ""),
        {"machine": machine(device), "speed": rows, "memory": mem},
    )


if __name__ == "__main__":
    main()
