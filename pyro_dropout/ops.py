"""Numerical operations shared by every layer of the package (it imports nothing from it)."""

from __future__ import annotations

import torch

__all__ = ["log_mean_exp"]


def log_mean_exp(x: torch.Tensor, dim: int = 0) -> torch.Tensor:
    r""":math:`\log \frac1K \sum_k e^{x_k}` along ``dim``, precise even for close :math:`x_k`.

    Computed as :math:`m + \mathrm{log1p}(\mathrm{mean}(\mathrm{expm1}(x - m)))` with
    :math:`m = \max_k x_k`, so that tiny spreads (BB-α with small α) keep full precision.
    """
    m = x.detach().amax(dim=dim, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    return (m + torch.log1p(torch.expm1(x - m).mean(dim=dim, keepdim=True))).squeeze(dim)
