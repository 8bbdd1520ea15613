"""The per-draw loops that ``benchmarks/predictive.py`` compares ``predict`` with.

* ``raw_loop``: hand-written MC dropout on the UCI net, one draw at a time, each a pair of 2-D
  GEMMs (``F.linear``) with masked weights: the form whose layer outputs stay in cache;
* ``bayesian_torch_loop``: the same network of bayesian-torch's ``LinearReparameterization``
  layers (an optional dependency: ``pip install --no-deps bayesian-torch``), one forward pass per
  draw, as its documentation predicts: a peer library's speed on the same FLOPs;
* ``square_gemm``: the machine's 2048 x 2048 matrix product, the rate a GEMM can reach.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

D, H, P = 13, 50, 0.05


def raw_loop(x: torch.Tensor, t: int) -> Callable[[], torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    m1, m2 = torch.randn(H, D, generator=g).to(x.device), torch.randn(1, H, generator=g).to(x.device)
    b1, b2 = torch.zeros(H, device=x.device), torch.zeros(1, device=x.device)

    def run() -> torch.Tensor:
        out = torch.empty(t, x.shape[0], device=x.device)
        with torch.no_grad():
            for i in range(t):
                z1 = (torch.rand(D, device=x.device) > P) / (1 - P)
                z2 = (torch.rand(H, device=x.device) > P) / (1 - P)
                h = torch.relu(F.linear(x, m1 * z1, b1))
                out[i] = F.linear(h, m2 * z2, b2).squeeze(-1)
        return out

    return run


def bayesian_torch_loop(x: torch.Tensor, t: int) -> Callable[[], torch.Tensor] | None:
    """None where bayesian-torch is not installed."""
    try:
        from bayesian_torch.layers import LinearReparameterization
    except ImportError:
        return None
    layers = torch.nn.ModuleList([LinearReparameterization(D, H), LinearReparameterization(H, 1)]).to(
        x.device
    )

    def run() -> torch.Tensor:
        out = torch.empty(t, x.shape[0], device=x.device)
        with torch.no_grad():
            for i in range(t):
                h = torch.relu(layers[0](x, return_kl=False))
                out[i] = layers[1](h, return_kl=False).squeeze(-1)
        return out

    return run


def square_gemm(device: torch.device, n: int = 2048) -> tuple[Callable[[], torch.Tensor], float]:
    """The product and its FLOPs."""
    a = torch.randn(n, n, device=device)
    return (lambda: a @ a), 2.0 * n**3
