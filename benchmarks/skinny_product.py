"""The batched product of a layer with few outputs, in its two layouts (``pyro_dropout.nn.products``).

Run: python benchmarks/skinny_product.py [--device auto|cpu|cuda] [--quick]

For ``B = 4`` draws of an ``[N, 50]`` input and a ``[out, 50]`` weight, interleaved in one run,
best of several blocks:

* ``standard`` (``standard_product``): ``baddbmm(b, x, W.T)``, the ``[B, N, out]`` result
  directly;
* ``transposed`` (``transposed_product``): ``baddbmm(b, W, x.T)``, the ``[B, out, N]`` result
  transposed back (and made contiguous), the layout ``linear`` takes in prediction for at most
  ``MAX_SKINNY_OUT`` outputs and at least ``MIN_SKINNY_ROWS`` rows.

Each as the forward product alone (no gradient) and as forward plus backward; the ratio is
transposed over standard, so below 1 the transposed layout is faster.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import interleaved_best, machine, pick_device, write

from pyro_dropout.nn.products import standard_product, transposed_product

DRAWS, D_IN = 4, 50


def case(device: torch.device, n: int, d_out: int, backward: bool, blocks: int) -> dict:
    torch.manual_seed(0)
    x = torch.randn(DRAWS, n, D_IN, device=device, requires_grad=backward)
    w = torch.randn(DRAWS, d_out, D_IN, device=device, requires_grad=backward)
    b = torch.randn(DRAWS, d_out, device=device, requires_grad=backward)

    def runner(form):
        if backward:
            return lambda: form(x, w, b).sum().backward()
        return lambda: form(x, w, b)

    with torch.no_grad():
        same = torch.allclose(standard_product(x, w, b), transposed_product(x, w, b), atol=1e-4)
        assert same, "the layouts disagree"
    steps = max(1, 40_000 // n)
    with torch.set_grad_enabled(backward):
        seconds = interleaved_best(
            {"standard": runner(standard_product), "transposed": runner(transposed_product)},
            device,
            steps,
            blocks,
            warmup=2,
        )
    return {
        "N": n,
        "out": d_out,
        "backward": backward,
        "standard_ms": seconds["standard"] * 1e3,
        "transposed_ms": seconds["transposed"] * 1e3,
        "ratio": seconds["transposed"] / seconds["standard"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--quick", action="store_true", help="fewer sizes and blocks (a smoke test)")
    args = parser.parse_args()
    device = pick_device(args.device)
    ns, outs, blocks = ((1000,), (1, 10), 2) if args.quick else ((128, 1000, 10_000), (1, 3, 10, 20), 9)
    print(f"skinny product on {device}, {torch.get_num_threads()} thread(s), {DRAWS} draws, {D_IN} inputs")
    rows = []
    for backward in (False, True):
        for d_out in outs:
            for n in ns:
                rows.append(case(device, n, d_out, backward, blocks))
                r = rows[-1]
                kind = "fwd+bwd" if backward else "forward"
                print(
                    f"  {kind:7s} out={d_out:3d} N={n:6d}: standard {r['standard_ms']:7.3f} ms, "
                    f"transposed {r['transposed_ms']:7.3f} ms, ratio {r['ratio']:.2f}"
                )
    write(
        f"skinny_product_{device.type}" + ("_quick" if args.quick else ""),
        {"machine": machine(device), "rows": rows},
    )


if __name__ == "__main__":
    main()
