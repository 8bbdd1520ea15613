r"""The weight term of the dropout KL, :math:`\sum_e (m_e - \mu)^2 + r \sum_e m_e^2`, in few passes.

Written with autograd's elementwise operations this term reads a site's means :math:`M` about
thirteen times a step (a difference, two squares, a product, two sums, and their backward passes
with two gradient accumulations): on a 784-1024-1024 network that is more than the rest of the
step's elementwise work. For a large site with one prior mean :math:`\mu` and no batch dims, it is
worked out here as two dot products and a difference (three passes), and its gradient,
:math:`2 g\,((1 + r) M - \mu)`, as one product and one subtraction: the same value up to the
order of the sums.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["FEW_PASSES_FROM", "weight_squares"]

# weights of a site from which the few-pass form is used: a traced call of it calls back into
# Python (tens of microseconds), more than the passes it saves on small sites
FEW_PASSES_FROM = 1 << 16


class _Squares(torch.autograd.Function):
    """:math:`\\sum (m - \\mu)^2 + r \\sum m^2` of a flat ``loc`` (``mu`` 0-dim; ``ratio`` a
    float or a 0-dim tensor, neither differentiated)."""

    @staticmethod
    def forward(ctx: Any, loc: torch.Tensor, mu: torch.Tensor, ratio: Any) -> torch.Tensor:
        flat = loc.reshape(-1)
        centred = flat - mu
        ctx.save_for_backward(loc, mu)
        ctx.ratio = ratio
        if isinstance(ratio, float) and ratio == 0.0:  # a point mass: no second pass
            return torch.dot(centred, centred)
        return torch.dot(centred, centred) + ratio * torch.dot(flat, flat)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        loc, mu = ctx.saved_tensors
        return loc.mul(2.0 * grad * (1.0 + ctx.ratio)).sub_(2.0 * grad * mu), None, None


def weight_squares(loc: torch.Tensor, mu: torch.Tensor, ratio: Any, event: torch.Size) -> torch.Tensor | None:
    """:math:`\\sum_e (m_e - \\mu)^2 + r \\sum_e m_e^2`, of shape ``loc.shape[:-len(event)]``, by
    :class:`_Squares` where it applies: ``loc`` of the event shape (batch dims of size one only:
    one set of means, not one per run), contiguous, at least :data:`FEW_PASSES_FROM` weights; one
    prior mean; ``mu`` and ``ratio`` not learned. Else None, and the caller takes the elementwise
    route."""
    fixed_ratio = isinstance(ratio, float) or (
        isinstance(ratio, torch.Tensor) and ratio.numel() == 1 and not ratio.requires_grad
    )
    lead = loc.shape[: loc.dim() - len(event)]
    if (
        loc.shape[len(lead) :] != event
        or any(size != 1 for size in lead)
        or not loc.is_contiguous()
        or loc.numel() < FEW_PASSES_FROM
        or mu.numel() != 1
        or mu.requires_grad
        or not fixed_ratio
    ):
        return None
    r = ratio if isinstance(ratio, float) else ratio.reshape(())
    return _Squares.apply(loc, mu.reshape(()).to(loc.dtype), r).reshape(lead)
