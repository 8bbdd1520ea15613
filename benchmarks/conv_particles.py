"""A convnet under K particles: one library step against K raw PyTorch passes doing the same work.

Run: python benchmarks/conv_particles.py [--device auto|cpu|cuda] [--quick] [--threads N]

The network is LeNet (``pyro_dropout.nn.LeNet``: conv 1→20 and 20→50, 5×5, max pools, fc
800→500→10) with dropout on the inputs of every layer after the first (p = 0.1, and 0.5 before
the last), on a minibatch of 256 MNIST-sized images. For K = 1, 2, 4 particles:

* ``library``: ``CompiledSVI`` with ``DropoutELBO(num_particles=K)`` (vectorised particles: the
  K draws of every weight run as one batched layer);
* ``raw``: a hand-written PyTorch step with the same layers, K forward passes one after another
  (each with its own channel and unit masks, inverted scaling), the mean of their
  log-likelihoods, the same weight decay and Adam.

Printed: each step's time (the best of several interleaved blocks, this process's CPU time on a
CPU) and ``library / raw``. The raw step's cost grows as K; a ratio that stays flat means the
library's K particles cost K× one.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pyro
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import interleaved_best, machine, pick_device, work_clock, write

from pyro_dropout import DropoutELBO, DropoutGuide
from pyro_dropout.infer import CompiledSVI
from pyro_dropout.nn import LeNet

N_DATA, BATCH, P, P_LAST, LR = 60_000, 256, 0.1, 0.5, 1e-3


class RawLeNet:
    """LeNet in plain PyTorch: K passes, each with its own input masks."""

    def __init__(self, device: torch.device) -> None:
        def param(*shape: int) -> torch.Tensor:
            return (torch.randn(*shape, device=device) / shape[-1] ** 0.5).requires_grad_()

        self.params = [
            param(20, 1, 5, 5), param(20), param(50, 20, 5, 5), param(50),
            param(500, 800), param(500), param(10, 500), param(10),
        ]  # fmt: skip
        self.opt = torch.optim.Adam(self.params, lr=LR)

    def _mask(self, shape: tuple, p: float, device: torch.device) -> torch.Tensor:
        return torch.bernoulli(torch.full(shape, 1 - p, device=device)) / (1 - p)

    def loss(self, x: torch.Tensor, y: torch.Tensor, k: int) -> torch.Tensor:
        w1, b1, w2, b2, w3, b3, w4, b4 = self.params
        total = x.new_zeros(())
        for _ in range(k):
            h = F.max_pool2d(F.conv2d(x, w1, b1), 2)
            h = h * self._mask((1, 20, 1, 1), P, x.device)  # one mask per input channel
            h = F.max_pool2d(F.conv2d(h, w2, b2), 2).flatten(1)
            h = torch.relu(F.linear(h * self._mask((1, 800), P, x.device), w3, b3))
            logits = F.linear(h * self._mask((1, 500), P_LAST, x.device), w4, b4)
            total = total - (N_DATA / len(x)) * F.cross_entropy(logits, y, reduction="sum")
        decay = sum((w**2).sum() for w in self.params) * 1e-4
        return -total / k + decay

    def step(self, x: torch.Tensor, y: torch.Tensor, k: int) -> float:
        loss = self.loss(x, y, k)
        loss.backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        return float(loss.detach())


def library(k: int, device: torch.device) -> CompiledSVI:
    pyro.clear_param_store()
    model = LeNet(dropout=P_LAST, dropout_all=P, num_data=N_DATA).to(device)
    guide = DropoutGuide(model)
    return CompiledSVI(model, guide, pyro.optim.Adam({"lr": LR}), DropoutELBO(num_particles=k))


def case(k: int, x: torch.Tensor, y: torch.Tensor, device: torch.device, steps: int) -> dict:
    clock, _ = work_clock(device)
    raw, svi = RawLeNet(device), library(k, device)
    runners = {"raw": lambda: raw.step(x, y, k), "library": lambda: svi.step(x, y, num_data=N_DATA)}
    best = interleaved_best(runners, device, steps, blocks=3, clock=clock, warmup=2)
    row = {"particles": k, "raw_ms": 1e3 * best["raw"], "library_ms": 1e3 * best["library"]}
    row["library_vs_raw"] = row["library_ms"] / row["raw_ms"]
    print(
        f"  K = {k}: raw {row['raw_ms']:8.1f} ms  library {row['library_ms']:8.1f} ms  "
        f"({row['library_vs_raw']:.2f}x raw)"
    )
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = pick_device(args.device)
    torch.manual_seed(0)
    batch = 32 if args.quick else BATCH
    x = torch.rand(batch, 1, 28, 28, device=device)
    y = torch.randint(0, 10, (batch,), device=device)
    steps = 1 if args.quick else 3
    print(f"conv_particles benchmark on {device} ({torch.get_num_threads()} threads), batch {batch}")
    rows = [case(k, x, y, device, steps) for k in (1, 2, 4)]
    write(
        f"conv_particles_{device.type}" + ("_quick" if args.quick else ""),
        {"machine": machine(device), "rows": rows},
    )


if __name__ == "__main__":
    main()
