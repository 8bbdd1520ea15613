r"""Bernoulli dropout: the variational family of MC dropout (Gal & Ghahramani, 2016)."""

from __future__ import annotations

import torch

from .masked_weight import MaskedWeight

__all__ = ["BernoulliDropout"]


class BernoulliDropout(MaskedWeight):
    r"""Weights :math:`W = M\,\mathrm{diag}(z)/(1-p)` with :math:`z_j \sim \mathrm{Bernoulli}(1-p)`.

    The variational distribution of MC dropout (paper [1], eq. 5-7) with the drop
    probability ``p`` held fixed. Samples are reparameterised in :math:`M`; the masks
    are drawn without gradient, so ``p`` itself cannot be learned (use
    :class:`~pyro_dropout.distributions.ConcreteDropout` for that).

    Usage::

        q = BernoulliDropout(torch.randn(50, 13), p=0.1)   # event_shape (50, 13)
        w = q.rsample()                                      # columns dropped w.p. 0.1

    References

    [1] Y. Gal, Z. Ghahramani. *Dropout as a Bayesian Approximation.* ICML 2016.
    """

    def sample_keep_with(self, shape: torch.Size, p: torch.Tensor | float) -> torch.Tensor:
        keep_prob = 1.0 - (p.detach() if isinstance(p, torch.Tensor) else p)
        uniform = torch.rand(shape, dtype=self.loc.dtype, device=self.loc.device)
        return (uniform < keep_prob).to(self.loc.dtype)

    def log_prob_keep(self, keep: torch.Tensor) -> torch.Tensor:
        p = self._p_as_tensor()
        p = p.reshape(p.shape + (1,))
        kept = keep > 0.5
        return torch.where(kept, torch.log1p(-p), torch.log(p)).expand(keep.shape)
