"""MC prediction of a network whose draws share most of the pass: LeNet with dropout on its last
layer's inputs only (paper 000 §5.2), where the convolutions are the same for every draw.

Run: python benchmarks/shared_pass.py [--device auto|cpu|cuda] [--quick]

For ``T`` draws on ``N`` images, interleaved in one run, best of several blocks:

* ``raw shared`` (the baseline): a hand-written pass that runs the convolutions and the first
  fully connected layer once, then ``T`` dropout masks and the last layer as one batched product;
* ``raw per draw``: the same network with ``F.dropout`` run once per draw, as a loop over
  ``model.train()`` passes is usually written;
* ``predict`` at the default ``chunk_size="auto"``, which sizes a chunk by what one more draw adds
  when the draws share part of the pass (``pyro_dropout.prediction.draw_cost``);
* ``predict(chunk_size=1)``: one draw per chunk, what the widest-tensor rule alone chose here.

Ratios are over ``raw shared``; below ``raw per draw``'s ratio the library runs the shared part
fewer times than a per-draw loop does.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import interleaved_best, machine, pick_device, work_clock, write

from pyro_dropout.guides import DropoutGuide
from pyro_dropout.nn import LeNet
from pyro_dropout.prediction import predict


def raw_weights(model: LeNet, guide: DropoutGuide, x: torch.Tensor) -> dict[str, torch.Tensor]:
    """The guide's mean weights of every layer, as plain tensors for the raw passes."""
    draw = predict(model, guide, x[:1], num_samples=1, return_sites=None).samples
    return {k: v[0].detach() for k, v in draw.items() if k.endswith(("weight", "bias"))}


def trunk(w: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    h = F.max_pool2d(F.conv2d(x, w["conv1.weight"], w["conv1.bias"]), 2)
    h = F.max_pool2d(F.conv2d(h, w["conv2.weight"], w["conv2.bias"]), 2)
    return torch.relu(F.linear(h.flatten(1), w["fc1.weight"], w["fc1.bias"]))


def raw_shared(w: dict[str, torch.Tensor], x: torch.Tensor, draws: int) -> torch.Tensor:
    h = trunk(w, x)  # [N, 500], once
    keep = torch.bernoulli(torch.full((draws, 1, h.shape[-1]), 0.5, device=x.device)) / 0.5
    return torch.baddbmm(w["fc2.bias"][:, None].T, h * keep, w["fc2.weight"].T.expand(draws, -1, -1))


def raw_per_draw(w: dict[str, torch.Tensor], x: torch.Tensor, draws: int) -> torch.Tensor:
    return torch.stack(
        [F.linear(F.dropout(trunk(w, x), 0.5), w["fc2.weight"], w["fc2.bias"]) for _ in range(draws)]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--quick", action="store_true", help="fewer images, draws and blocks (a smoke test)")
    args = parser.parse_args()
    device = pick_device(args.device)
    n, draws, blocks = (200, 20, 2) if args.quick else (1000, 50, 5)
    torch.manual_seed(0)
    model = LeNet(num_data=60_000).to(device)
    guide = DropoutGuide(model)
    x = torch.randn(n, 1, 28, 28, device=device)
    guide(x[:2], torch.zeros(2, dtype=torch.long, device=device))
    w = raw_weights(model, guide, x)
    clock, clock_name = work_clock(device)
    with torch.no_grad():
        runners = {
            "raw shared": lambda: raw_shared(w, x, draws),
            "raw per draw": lambda: raw_per_draw(w, x, draws),
            "predict": lambda: predict(model, guide, x, num_samples=draws, return_sites=["logits"]),
            "predict(chunk_size=1)": lambda: predict(
                model, guide, x, num_samples=draws, return_sites=["logits"], chunk_size=1
            ),
        }
        assert runners["predict"]().samples["logits"].shape == (draws, n, 10)
        seconds = interleaved_best(runners, device, 1, blocks, clock, warmup=1)
    base = seconds["raw shared"]
    print(f"LeNet, dropout on the last layer: T = {draws} draws of N = {n} images on {device}, {clock_name}")
    for name, s in seconds.items():
        print(f"  {name:22s} {s * 1e3:9.1f} ms  {s / base:6.2f}x raw shared")
    write(
        f"shared_pass_{device.type}" + ("_quick" if args.quick else ""),
        {
            "machine": machine(device),
            "clock": clock_name,
            "draws": draws,
            "images": n,
            "seconds": seconds,
            "ratio": {k: v / base for k, v in seconds.items()},
        },
    )


if __name__ == "__main__":
    main()
