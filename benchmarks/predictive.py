"""MC-dropout prediction: throughput against the machine's GEMM rate and peers, and peak memory.

Run: python benchmarks/predictive.py [--device auto|cpu|cuda] [--quick]

1. Speed: T = 1,000 draws on N = 10,000 points of the UCI net (13-50-1), in GFLOP/s of the
   network's products (2 T N (13·50 + 50·1)) and as a fraction of the machine's square GEMM
   rate (a 2048² product), measured in one run, interleaved:

   * ``predict`` with its default chunks (sized from the cache, each chunk's draws one batched
     pass of the model), with 100-draw chunks (the old default), and on a GPU with all draws in
     one chunk; and, apart, the first call on a new guide, which makes its checks;
   * peers (``predictive_peers.py``): a raw PyTorch loop, one draw at a time; bayesian-torch's
     layers, one forward pass per draw (skipped where it is not installed);
   * the batched matrix products of the same FLOPs, ``x @ W1[t].T`` and ``h @ W2[t].T`` for all
     t at once (the former baseline: its outputs fall out of cache, so it is no limit), timed
     after the others rather than among them, as its 2 GB of outputs would page memory in and
     out around them.
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
import time
from pathlib import Path

import pyro
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import best_time, interleaved_best, machine, pick_device, sync, write
from predictive_peers import bayesian_torch_loop, raw_loop, square_gemm

from pyro_dropout import DropoutGuide, predict
from pyro_dropout.nn import MLP


def uci_model(device: torch.device, n: int) -> tuple[MLP, DropoutGuide, torch.Tensor]:
    """A new model and guide (the parameter store cleared for them), and N inputs."""
    pyro.clear_param_store()
    torch.manual_seed(0)
    x = torch.randn(n, 13, device=device)
    model = MLP(13, hidden=(50,), tau=1.0).to(device)
    guide = DropoutGuide(model, dropout=0.05)
    guide(x)
    return model, guide, x


def equal_flop_matmul(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    h = torch.matmul(x, w1.transpose(-1, -2))  # [T, N, 50]
    return torch.matmul(h, w2.transpose(-1, -2))  # [T, N, 1]


def first_call(device: torch.device, t: int, n: int, repeats: int = 3) -> float:
    """Seconds of ``predict``'s first call on a new model and guide (its batching checks made,
    none kept from before): the fastest of ``repeats``, each on its own new pair."""
    times = []
    for _ in range(repeats):
        model, guide, x = uci_model(device, n)
        sync(device)
        start = time.perf_counter()
        predict(model, guide, x, num_samples=t, return_sites=["mean"])
        sync(device)
        times.append(time.perf_counter() - start)
    return min(times)


def speed(device: torch.device, t: int, n: int, blocks: int) -> dict:
    first = first_call(device, t, n)  # before the model timed below, which owns the parameters then
    model, guide, x = uci_model(device, n)
    w1, w2 = torch.randn(t, 50, 13, device=device), torch.randn(t, 1, 50, device=device)
    gemm, gemm_flops = square_gemm(device)
    runners = {
        "predict": lambda: predict(model, guide, x, num_samples=t, return_sites=["mean"]),
        "predict_chunk_100": lambda: predict(
            model, guide, x, num_samples=t, chunk_size=100, return_sites=["mean"]
        ),
        "raw_loop": raw_loop(x, t),
        "bayesian_torch_loop": bayesian_torch_loop(x, t),
        "square_gemm": gemm,
    }
    if device.type == "cuda":  # all draws in one chunk (on a CPU its 2 GB layer would page memory)
        runners["predict_one_chunk"] = lambda: predict(
            model, guide, x, num_samples=t, chunk_size=t, return_sites=["mean"]
        )
    missing = [k for k, v in runners.items() if v is None]
    seconds = interleaved_best(
        {k: v for k, v in runners.items() if v is not None}, device, 1, blocks, warmup=1
    )
    seconds["predict_first_call"] = first
    # timed apart, after the others: its 2 GB products would evict and page in memory around them
    seconds["equal_flop_batched_matmul"] = best_time(lambda: equal_flop_matmul(x, w1, w2), device, 3)
    pred = predict(model, guide, x, num_samples=t, return_sites=["mean"])
    assert pred["mean"].shape == (t, n) and torch.isfinite(pred["mean"]).all()
    flops = 2 * t * n * (13 * 50 + 50 * 1)
    gemm_rate = gemm_flops / seconds["square_gemm"] / 1e9
    rows = {
        name: {
            "seconds": s,
            "gflop_per_s": flops / s / 1e9,
            "fraction_of_square_gemm": flops / s / 1e9 / gemm_rate,
        }
        for name, s in seconds.items()
        if name != "square_gemm"
    }
    return {
        "T": t,
        "N": n,
        "gflop": flops / 1e9,
        "square_gemm_gflop_per_s": gemm_rate,
        "rows": rows,
        "missing": missing,
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
    result = speed(device, t, n, blocks=2 if args.quick else 7)
    print(f"  speed   T={t} N={n}: square GEMM {result['square_gemm_gflop_per_s']:.1f} GFLOP/s")
    for name, r in result["rows"].items():
        print(
            f"  speed   {name:26s} {r['seconds']:.3f} s  {r['gflop_per_s']:5.1f} GFLOP/s  "
            f"{r['fraction_of_square_gemm']:.2f} of the square GEMM"
        )
    for name in result["missing"]:
        print(f"  speed   {name:26s} not installed (pip install --no-deps bayesian-torch)")
    write(
        f"predictive_{device.type}" + ("_quick" if args.quick else ""),
        {"machine": machine(device), "speed": result, "memory": mem},
    )


if __name__ == "__main__":
    main()
