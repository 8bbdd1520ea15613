"""The batched product behind :func:`~pyro_dropout.nn.functional.linear`, in the faster of two
layouts.

``x @ W.T + b`` over ``B`` draws, ``x`` ``[B, N, in]`` and ``W`` ``[B, out, in]``, is one
``baddbmm``. When the layer has few outputs (a regression head, a classifier over a handful of
classes) and many rows, BLAS is slow at a product whose result has only ``out`` columns: it is
faster to compute the transposed result ``W @ x.T + b`` (``out`` rows of ``N`` columns) and
transpose it back. Measured on one and two CPU threads (``benchmarks/skinny_product.py``), the
forward product of a 50 -> 1 layer over 4 draws of 10,000 rows takes 0.54-0.58x the time that
way, and a 50 -> 10 layer 0.37-0.56x; with 20 outputs it is slower. With a gradient to take,
the transposed form makes the step slower for one output (up to 2.2x), so it is used only
where no gradient is recorded: prediction. On a GPU the standard layout is kept (not measured
there).
"""

from __future__ import annotations

import torch

__all__ = ["batched_linear", "standard_product", "transposed_product", "uses_transposed_product"]

MAX_SKINNY_OUT = 10  # at most this many outputs ...
MIN_SKINNY_ROWS = 512  # ... and at least this many rows: the transposed product is faster


def uses_transposed_product(n: int, d_out: int, *tensors: torch.Tensor | None) -> bool:
    """Whether :func:`batched_linear` computes ``[B, N, out]`` as the transpose of ``W @ x.T``:
    on the CPU (where it was measured), with few outputs, many rows, and no gradient to record."""
    given = [t for t in tensors if t is not None]
    if d_out > MAX_SKINNY_OUT or n < MIN_SKINNY_ROWS or any(t.device.type != "cpu" for t in given):
        return False
    return not (torch.is_grad_enabled() and any(t.requires_grad for t in given))


def standard_product(xs: torch.Tensor, ws: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    """``xs @ ws.T + b`` as one ``baddbmm`` (``bmm`` without a bias): ``[B, N, out]``."""
    w_t = ws.transpose(-1, -2)
    return torch.bmm(xs, w_t) if b is None else torch.baddbmm(b.unsqueeze(-2), xs, w_t)


def transposed_product(xs: torch.Tensor, ws: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    """``xs @ ws.T + b`` computed as ``ws @ xs.T + b`` (``[B, out, N]``), transposed back and
    made contiguous: ``[B, N, out]``."""
    x_t = xs.transpose(-1, -2)
    out_t = torch.bmm(ws, x_t) if b is None else torch.baddbmm(b.unsqueeze(-1), ws, x_t)
    return out_t.transpose(-1, -2).contiguous()


def batched_linear(xs: torch.Tensor, ws: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    """``xs @ ws.T + b`` for ``xs`` ``[B, N, in]``, ``ws`` ``[B, out, in]`` and ``b`` ``[B, out]``
    (or None): ``[B, N, out]``, contiguous, in the faster layout."""
    if uses_transposed_product(xs.shape[-2], ws.shape[-2], xs, ws, b):
        return transposed_product(xs, ws, b)
    return standard_product(xs, ws, b)
