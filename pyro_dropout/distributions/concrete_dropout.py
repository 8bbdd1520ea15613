r"""Concrete dropout: a relaxed Bernoulli mask with a learnable drop probability."""

from __future__ import annotations

import math

import torch

from .masked_weight import MaskedWeight

__all__ = ["ConcreteDropout"]

_EPS = 1e-7


class ConcreteDropout(MaskedWeight):
    r"""Weights :math:`W = M\,\mathrm{diag}(1-\tilde z)/(1-p)` with a Concrete drop indicator.

    The drop indicator is the binary Concrete (relaxed Bernoulli) variable of paper [1], eq. 5,

    $$
    \tilde z = \mathrm{sigmoid}\Big(\tfrac{1}{t}\big(\log p - \log(1-p)
    + \log u - \log(1-u)\big)\Big),
    \qquad u \sim \mathcal{U}(0, 1),
    $$

    so the sample is differentiable in both :math:`M` and :math:`p`, and ``p`` can be
    learned by gradient descent. As :math:`t \to 0` the family tends to
    :class:`~pyro_dropout.distributions.BernoulliDropout`; its KL to the prior is
    approximated by the Bernoulli one (paper [1], appendix B).

    :param loc: the variational mean :math:`M`.
    :param p: drop probability in (0, 1), a tensor (usually a learnable parameter).
    :param temperature: the relaxation temperature :math:`t > 0` (default 0.1, as in [1]).

    References

    [1] Y. Gal, J. Hron, A. Kendall. *Concrete Dropout.* NeurIPS 2017.
    """

    def __init__(
        self,
        loc: torch.Tensor,
        p: torch.Tensor | float,
        temperature: float = 0.1,
        event_dim: int = 2,
        validate_args: bool | None = None,
        *,
        mask_dim: int | None = None,
    ) -> None:
        if not (isinstance(temperature, int | float) and temperature > 0 and math.isfinite(temperature)):
            raise ValueError(f"ConcreteDropout: temperature must be a positive float, got {temperature!r}")
        self.temperature = float(temperature)
        super().__init__(loc, p, event_dim=event_dim, validate_args=validate_args, mask_dim=mask_dim)

    def _copy_extra_state(self, new: MaskedWeight) -> None:
        assert isinstance(new, ConcreteDropout)
        new.temperature = self.temperature

    def sample_keep_with(self, shape: torch.Size, p: torch.Tensor | float) -> torch.Tensor:
        # keep = 1 - sigmoid((logit p + logit u) / t) = sigmoid(-logit(u) / t - logit(p) / t): the
        # noise term made in place, without gradient, and one pass that carries p's gradient
        p = torch.as_tensor(p, dtype=self.loc.dtype, device=self.loc.device)
        with torch.no_grad():
            u = torch.rand(shape, dtype=self.loc.dtype, device=self.loc.device)
            noise = u.clamp_(_EPS, 1 - _EPS).logit_().mul_(-1.0 / self.temperature)
        drop_logit = (torch.log(p + _EPS) - torch.log1p(-p + _EPS)) / self.temperature
        return torch.sigmoid(noise - drop_logit)

    def log_prob_keep(self, keep: torch.Tensor) -> torch.Tensor:
        # density of the relaxed drop indicator z = 1 - keep under RelaxedBernoulli(t, p)
        t = self.temperature
        p = self._p_as_tensor()
        p = p.reshape(p.shape + (1,))
        z = (1.0 - keep).clamp(_EPS, 1 - _EPS)
        logits = torch.log(p) - torch.log1p(-p)
        diff = logits - t * (torch.log(z) - torch.log1p(-z))
        return math.log(t) + diff - 2.0 * torch.nn.functional.softplus(diff) - torch.log(z) - torch.log1p(-z)

    def __repr__(self) -> str:
        return f"{super().__repr__()[:-1]}, temperature: {self.temperature})"
