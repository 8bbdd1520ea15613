"""MC prediction of converted networks, one of each family of the conformance battery
(tests/nn/conformance.py), against the network's own loop of T passes with its dropout active
(torch-uncertainty's way; a classifier's class probabilities by softmax):
``MCDropout(net).predict`` (its draws sharing a pass on the rows repeated), and one pass per draw
(``per_draw=True``, the fallback of a forward that mixes rows).

    python benchmarks/converted_prediction.py            # T = 200 draws on N = 128 points per family
    python benchmarks/converted_prediction.py --quick    # T = 20 on N = 8, four families, seconds

Beside the battery's, the UCI net (dropout on its inputs and hidden units) and LeNet (dropout
before its last layer: its convolutions are the same for every draw, and run once).

Each variant runs in turn, interleaved over the blocks, timed with this process's CPU time
(``common.work_clock``) on one thread (``--threads``: CPU time counts every thread's); the ratios
are against the own loop timed in the same blocks. That the
draws have the network's own distribution is what the battery checks (tests/nn/test_conformance.py).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
from common import interleaved_best, machine, pick_device, work_clock, write
from torch import nn

from pyro_dropout import MCDropout

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the battery's networks, in tests/
from tests.nn.conformance import build, cases

FAMILIES = (
    "uci-net",
    "lenet",
    "mnist-net",
    "token-mlp",
    "mlp-mixer",
    "resnet-basic-blocks",
    "mobilenet-depthwise",
    "unet-skip-dropout2d",
    "text-cnn",
    "lstm-language-model",
    "gru-two-layers",
    "transformer-encoder-attention",
    "vit",
    "hf-bert",
)
QUICK = ("uci-net", "lenet", "token-mlp", "lstm-language-model")


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


def _network(name: str) -> tuple[nn.Module, torch.Tensor, str]:
    """A family's network, its inputs and its task: the battery's, the UCI net and LeNet."""
    torch.manual_seed(0)
    if name == "uci-net":
        net = nn.Sequential(
            nn.Dropout(0.05), nn.Linear(13, 50), nn.ReLU(), nn.Dropout(0.05), nn.Linear(50, 1)
        )
        return net.eval(), torch.randn(8, 13), "regression"
    if name == "lenet":
        return TorchLeNet().eval(), torch.randn(8, 1, 28, 28), "classification"
    net, x = build(cases()[name], seed=0)
    return net, x, cases()[name].task


def own_loop(net: nn.Module, x: torch.Tensor, draws: int, task: str) -> list:
    """The network's own MC dropout: ``draws`` passes in train mode, batch norm on its statistics,
    each pass's output as the predictive's parameters (class probabilities, by softmax)."""
    net.train()
    for module in net.modules():
        if isinstance(module, nn.modules.batchnorm._BatchNorm):
            module.eval()
    dim = {"classification": -1, "segmentation": 1}.get(task)
    with torch.no_grad():
        outs = [_logits(net(x)) for _ in range(draws)]
        return outs if dim is None else [torch.softmax(out, dim) for out in outs]


def _logits(out: object) -> torch.Tensor:
    return out if isinstance(out, torch.Tensor) else out.logits  # type: ignore[attr-defined]


def _rows(x: torch.Tensor, n: int) -> torch.Tensor:
    """``n`` rows like the battery's inputs (its first rows, repeated)."""
    return x.repeat(-(-n // len(x)), *([1] * (x.dim() - 1)))[:n]


def bench(name: str, draws: int, rows: int, blocks: int, device: torch.device) -> dict:
    net, x, task = _network(name)
    net, x = net.to(device), _rows(x, rows).to(device)
    bnn = MCDropout(net, task, num_samples=draws, **({"tau": 1.0} if task == "regression" else {}))
    bnn.predict(x[:2], num_samples=2)  # the guide set up, the rows check made

    def run(per_draw: bool | None) -> object:
        bnn.model.per_draw = per_draw
        return bnn.predict(x)

    runners = {"own loop": lambda: own_loop(net, x, draws, task), "MCDropout": lambda: run(None)}
    runners["per draw"] = lambda: run(True)
    clock, clock_name = work_clock(device)
    best = interleaved_best(runners, device, steps=1, blocks=blocks, clock=clock, warmup=1)
    base = best["own loop"]
    print(f"{name}: T = {draws}, N = {rows} ({clock_name})")
    for key, seconds in best.items():
        print(f"  {key:12s} {seconds * 1e3:9.1f} ms   {seconds / base:5.2f}x the own loop")
    return {"draws": draws, "rows": rows, "seconds": best, "ratio": {k: v / base for k, v in best.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (CPU time counts them all)")
    parser.add_argument("--families", nargs="+", choices=FAMILIES, help="these families only")
    parser.add_argument("--draws", type=int, help="T (default 200)")
    parser.add_argument("--rows", type=int, help="N (default 128)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = pick_device(args.device)
    draws, rows, blocks, families = (20, 8, 2, QUICK) if args.quick else (200, 128, 3, FAMILIES)
    draws, rows, families = args.draws or draws, args.rows or rows, args.families or families
    results = {}
    for name in families:
        if name.startswith("hf-"):
            try:
                import transformers  # noqa: F401
            except ImportError:
                print(f"{name}: skipped (transformers is not installed)")
                continue
        results[name] = bench(name, draws, rows, blocks, device)
    chosen = "" if args.families is None else "_" + "_".join(families)
    write(
        f"converted_prediction_{device.type}{'_quick' if args.quick else ''}{chosen}",
        {"machine": machine(device), **results},
    )


if __name__ == "__main__":
    main()
