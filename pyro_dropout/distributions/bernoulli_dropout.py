r"""Bernoulli dropout: the variational family of MC dropout (Gal & Ghahramani, 2016)."""

from __future__ import annotations

import math

import torch

from .masked_weight import MaskedWeight

__all__ = ["BernoulliDropout", "bernoulli_keep", "keep_threshold"]

_WORD_MIN = -(2**63)  # ``random_(_WORD_MIN, None)`` fills int64 with all 64 bits random


def _keep_kernel(threshold: torch.Tensor, shape: list[int]) -> torch.Tensor:
    n = math.prod(shape)
    words = torch.empty((n + 1) // 2, dtype=torch.int64, device=threshold.device).random_(_WORD_MIN, None)
    return words.view(torch.int32)[:n].view(shape) <= threshold


# An op of its own so that a recorded graph (make_fx, torch.compile) holds it whole: one random
# operation, where the dtype view that splits each random 64-bit word into two 32-bit integers
# would be a view of an integer tensor the recorder and Inductor would have to follow. Registered with
# the dispatcher directly, one kernel for every device: a draw costs no autograd wrapper (its
# result is boolean), about 25 us a call against 47 us as a ``torch.library.custom_op``.
_LIBRARY = torch.library.Library("pyro_dropout", "FRAGMENT")
_LIBRARY.define("bernoulli_keep(Tensor threshold, SymInt[] shape) -> Tensor")
_LIBRARY.impl("bernoulli_keep", _keep_kernel, "CompositeExplicitAutograd")


@torch.library.register_fake("pyro_dropout::bernoulli_keep", lib=_LIBRARY)
def _(threshold: torch.Tensor, shape: list[int]) -> torch.Tensor:
    return torch.empty(shape, dtype=torch.bool, device=threshold.device)


_keep_op = torch.ops.pyro_dropout.bernoulli_keep.default


def keep_threshold(keep_prob: torch.Tensor | float, device: torch.device) -> torch.Tensor:
    r"""The int32 ``t`` with :math:`P(\text{bits} \le t) = \mathrm{round}(\text{keep\_prob} \cdot
    2^{32}) / 2^{32}` for uniform int32 bits. A float's is worked out in Python (doubles, ties to
    even, as ``torch.round``), so a recorded graph holds one constant, not seven operations a step."""
    if isinstance(keep_prob, torch.Tensor):  # recorded as an op (torch.as_tensor would be frozen)
        keep = keep_prob.detach().to(device=device, dtype=torch.float64)
        return (torch.round(keep * 2.0**32) - (2**31 + 1)).clamp(-(2**31), 2**31 - 1).to(torch.int32)
    bits = min(max(round(float(keep_prob) * 2.0**32) - (2**31 + 1), -(2**31)), 2**31 - 1)
    return torch.tensor(bits, dtype=torch.int32, device=device)


def bernoulli_keep(shape: torch.Size, keep_prob: torch.Tensor | float, device: torch.device) -> torch.Tensor:
    r"""Boolean draws of :math:`\mathrm{Bernoulli}(\text{keep\_prob})` of ``shape``.

    Each draw compares a uniform 32-bit integer with a threshold, and every random 64-bit
    word gives two such integers. The probability is exact to :math:`2^{-32}` (a
    ``torch.rand(...) < q`` comparison resolves :math:`2^{-24}`), and on CPU a per-example
    masking takes 0.6-0.85x the time of one made with ``torch.rand`` (``benchmarks/per_example_masks.py``,
    which also times a whole training step with each).

    :param keep_prob: in (0, 1], a float or a tensor broadcasting against ``shape``;
        ``keep_prob = 1`` keeps every unit, and values below :math:`2^{-32}` count as
        :math:`2^{-32}` (a dropout rate is below 1, so a keep probability is above 0).
    """
    return _keep_op(keep_threshold(keep_prob, device), list(shape))


class BernoulliDropout(MaskedWeight):
    r"""Weights :math:`W = M\,\mathrm{diag}(z)/(1-p)` with :math:`z_j \sim \mathrm{Bernoulli}(1-p)`.

    The variational distribution of MC dropout (paper [1], eq. 5-7) with the drop
    probability ``p`` held fixed. Samples are reparameterised in :math:`M`; the masks
    are drawn without gradient, so ``p`` itself cannot be learned (use
    :class:`~pyro_dropout.distributions.ConcreteDropout` for that).

    Usage:

        q = BernoulliDropout(torch.randn(50, 13), p=0.1)   # event_shape (50, 13)
        w = q.rsample()                                      # columns dropped w.p. 0.1

    References

    [1] Y. Gal, Z. Ghahramani. *Dropout as a Bayesian Approximation.* ICML 2016.
    """

    def sample_keep_with(self, shape: torch.Size, p: torch.Tensor | float) -> torch.Tensor:
        return self._keep(shape, p).to(self.loc.dtype)

    def scaled_keep_with(self, shape: torch.Size, p: torch.Tensor | float) -> torch.Tensor:
        # one pass from the boolean draw to keep / (1 - p); ``where`` reads the booleans as they
        # are, where a product would first convert them to floats
        if isinstance(p, torch.Tensor):
            scale = 1.0 / (1.0 - p.detach().to(self.loc.dtype))
        else:
            scale = torch.tensor(1.0 / (1.0 - p), dtype=self.loc.dtype, device=self.loc.device)
        return torch.where(self._keep(shape, p), scale, 0.0)

    def _keep(self, shape: torch.Size, p: torch.Tensor | float) -> torch.Tensor:
        keep_prob = 1.0 - (p.detach().to(torch.float64) if isinstance(p, torch.Tensor) else p)
        return bernoulli_keep(shape, keep_prob, self.loc.device)

    def log_prob_keep(self, keep: torch.Tensor) -> torch.Tensor:
        p = self._p_as_tensor()
        p = p.reshape(p.shape + (1,))
        kept = keep > 0.5
        return torch.where(kept, torch.log1p(-p), torch.log(p)).expand(keep.shape)
