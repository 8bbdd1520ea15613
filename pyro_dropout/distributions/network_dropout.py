r"""Bernoulli dropout whose masks the network draws: a converted network's own dropout."""

from __future__ import annotations

import torch

from .bernoulli_dropout import BernoulliDropout
from .masked_weight import SampleShape

__all__ = ["NetworkDropout"]


class NetworkDropout(BernoulliDropout):
    r"""The dropout family :math:`W = M\,\mathrm{diag}(z)/(1-p)` of a weight whose masks the
    network itself draws where it uses the weight.

    A trained network converted with ``from_module(net, masks="own")`` keeps its dropout modules:
    ``nn.Dropout`` before an ``nn.Linear`` draws a new mask for every element of every row (every
    token of a sequence, every pixel) at every call, as the network's own MC dropout does. That
    mask is :math:`z` of this family, drawn per element rather than once per weight, so a sample of
    the weight here is its mean :math:`M` and the network masks the layer's inputs. The KL to the
    prior is that of :class:`~pyro_dropout.distributions.BernoulliDropout` (paper [1], eq. 3 with
    the inverted-dropout scaling): the same weight, the same rate, the same closed form.

    References

    [1] Y. Gal, J. Hron, A. Kendall. *Concrete Dropout.* NeurIPS 2017.
    """

    def rsample(self, sample_shape: SampleShape = torch.Size()) -> torch.Tensor:  # noqa: B008
        return self.loc.expand(self._extended_shape(sample_shape))

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        """Zero: the mask of this family is not in the value (inference uses the analytic KL)."""
        return torch.zeros(
            value.shape[: value.dim() - self.event_dim], dtype=value.dtype, device=value.device
        )
