r"""Pyro's ``Categorical``, drawn by the inverse of its CDF: the same distribution, faster."""

from __future__ import annotations

import pyro.distributions as dist
import torch
from torch.distributions.utils import lazy_property

from .masked_weight import SampleShape

__all__ = ["Categorical"]

_FEW = 8  # classes up to which a draw sums the classes' slices (3 classes: 30 ms against 77 ms)


class Categorical(dist.Categorical):
    r"""``pyro.distributions.Categorical`` whose draws are :math:`\#\{c : F_c < u\}`,
    :math:`u \sim U(0, 1)` and :math:`F` the cumulative probabilities: one uniform per draw
    against a cumulative sum, where torch's ``multinomial`` takes about four times as long on a
    CPU (a class per pixel of 200 draws of 64 images, 8x8, 3 classes: 24 ms against 96 ms); its
    probabilities from given logits are their exponential. A converted network's likelihood draws
    its posterior predictive classes with it."""

    @lazy_property
    def probs(self) -> torch.Tensor:
        """``exp(logits)``: the logits are normalised when given (log-probabilities), so no softmax
        (which is slow over a last dim of a few classes) is needed."""
        return self.logits.exp()

    def sample(self, sample_shape: SampleShape = torch.Size()) -> torch.Tensor:  # noqa: B008
        probs = self.probs
        shape = torch.Size(sample_shape) + self.batch_shape
        probs = probs.expand(shape + probs.shape[-1:])
        classes = probs.shape[-1]
        if classes <= _FEW:  # a running sum over the classes' slices: no scan over a short last dim
            u = torch.rand(shape, dtype=probs.dtype, device=probs.device)
            cumulative = probs[..., 0].clone()
            count = (cumulative < u).long()
            for c in range(1, classes - 1):
                count += (cumulative.add_(probs[..., c]) < u).long()
            return count
        u = torch.rand(shape + (1,), dtype=probs.dtype, device=probs.device)
        return (probs.cumsum(-1) < u).sum(-1).clamp_max(classes - 1)
