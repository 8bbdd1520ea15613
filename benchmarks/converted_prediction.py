"""MC prediction of a converted network: its draws folded into the batch (the default), one draw at
a time (the self-check's fallback, ``per_draw=True``), against the network's own loop of T passes
with its dropout active (torch-uncertainty's way), on the UCI net and on LeNet.

    python benchmarks/converted_prediction.py            # T = 1000 (UCI net, N = 1000), 200 (LeNet, N = 500)
    python benchmarks/converted_prediction.py --quick    # small sizes, seconds

Each variant runs in turn, interleaved over the blocks, timed with this process's CPU time
(``common.work_clock``); the ratios are against the own loop timed in the same blocks. Before
timing, the folded draws are checked against one draw at a time (the same draws, 1e-5).
"""

from __future__ import annotations

import argparse
import copy

import pyro
import torch
from common import interleaved_best, machine, pick_device, work_clock, write
from pyro import poutine
from torch import nn

from pyro_dropout import DropoutGuide, predict
from pyro_dropout.nn import from_module
from pyro_dropout.prediction import DRAWS_PLATE


def uci_net() -> nn.Module:
    return nn.Sequential(nn.Dropout(0.05), nn.Linear(13, 50), nn.ReLU(), nn.Dropout(0.05), nn.Linear(50, 1))


class TorchLeNet(nn.Module):
    """LeNet with dropout before its last layer, as a user writes it (paper 000, §5.2)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(1, 20, 5), nn.Conv2d(20, 50, 5)
        self.fc1, self.drop, self.fc2 = nn.Linear(800, 500), nn.Dropout(0.5), nn.Linear(500, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = nn.functional.max_pool2d(self.conv1(x), 2)
        h = nn.functional.max_pool2d(self.conv2(h), 2)
        return self.fc2(self.drop(torch.relu(self.fc1(h.view(h.size(0), -1)))))


def own_loop(net: nn.Module, x: torch.Tensor, draws: int) -> torch.Tensor:
    """The network's own MC dropout: ``draws`` passes in train mode (its dropout active)."""
    net.train()
    with torch.no_grad():
        return torch.stack([net(x) for _ in range(draws)])


def _converted(net: nn.Module, x: torch.Tensor, y: torch.Tensor, likelihood: str):
    model = from_module(copy.deepcopy(net).eval(), likelihood)
    guide = DropoutGuide(model)
    guide(x, y)
    return model, guide


def _check_folded(model, guide, x: torch.Tensor, site: str) -> float:
    """The largest difference between the folded draws and the same draws one at a time."""
    with torch.no_grad(), pyro.plate(DRAWS_PLATE, 3, dim=-2):
        draws = poutine.trace(guide).get_trace(x)
        folded = poutine.trace(poutine.replay(model, trace=draws)).get_trace(x).nodes[site]["value"]
        model.per_draw = True
        looped = poutine.trace(poutine.replay(model, trace=draws)).get_trace(x).nodes[site]["value"]
        model.per_draw = None
    return float((folded - looped).abs().max())


def bench(
    name: str,
    net: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    likelihood: str,
    draws: int,
    blocks: int,
    device,
) -> dict:
    site = "logits" if likelihood == "categorical" else "mean"
    model, guide = _converted(net, x, y, likelihood)
    gap = _check_folded(model, guide, x, site)
    assert gap < 1e-4, f"{name}: folded draws differ from one draw at a time by {gap}"

    def run(per_draw: bool | None) -> torch.Tensor:
        model.per_draw = per_draw
        return predict(model, guide, x, num_samples=draws, return_sites=[site], jit=not per_draw)[site]

    runners = {
        "own loop": lambda: own_loop(net, x, draws),
        "folded (default)": lambda: run(None),
        "per draw": lambda: run(True),
    }
    clock, clock_name = work_clock(device)
    best = interleaved_best(runners, device, steps=1, blocks=blocks, clock=clock, warmup=1)
    base = best["own loop"]
    print(f"{name}: T = {draws}, N = {len(x)} ({clock_name}; folded checked against per-draw: {gap:.1e})")
    for key, seconds in best.items():
        print(f"  {key:18s} {seconds * 1e3:9.1f} ms   {seconds / base:5.2f}x the own loop")
    return {"draws": draws, "rows": len(x), "seconds": best, "ratio": {k: v / base for k, v in best.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    device = pick_device(args.device)
    torch.manual_seed(0)
    n_uci, t_uci, n_lenet, t_lenet, blocks = (
        (200, 100, 50, 20, 2) if args.quick else (1000, 1000, 500, 200, 5)
    )
    x, y = torch.randn(n_uci, 13, device=device), torch.randn(n_uci, device=device)
    results = {"uci": bench("UCI net 13-50-1", uci_net().to(device), x, y, "normal", t_uci, blocks, device)}
    images, labels = (
        torch.randn(n_lenet, 1, 28, 28, device=device),
        torch.randint(0, 10, (n_lenet,), device=device),
    )
    results["lenet"] = bench(
        "LeNet", TorchLeNet().to(device), images, labels, "categorical", t_lenet, blocks, device
    )
    write(
        f"converted_prediction_{device.type}{'_quick' if args.quick else ''}",
        {"machine": machine(device), **results},
    )


if __name__ == "__main__":
    main()
