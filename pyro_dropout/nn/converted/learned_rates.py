r"""A network's own dropout module whose rate a guide learns (Concrete dropout, Gal, Hron &
Kendall 2017, on the network's own masks): what ``MCDropout(net, concrete=True)`` puts in its copy
of the network in place of each dropout module that makes a Bayesian layer's rate.

The module draws a mask for every element, as the network's ``nn.Dropout`` does, at the rate
``rate()`` reads from the guide (the weight site's learned :math:`p`). Under gradients (a training
step) the mask is the Concrete relaxation of the Bernoulli drop indicator at temperature ``t``,
:math:`\tilde z = \sigma\big((\log p - \log(1-p) + \log u - \log(1-u))/t\big)`, keep
:math:`1 - \tilde z`, so that the likelihood's gradient reaches :math:`p`; the guide's KL (the
weight's ``NetworkDropout`` family at that :math:`p`) holds the rest of the objective. Without
gradients (prediction, generation) the mask is Bernoulli(:math:`1 - p`), drawn by ``bernoulli_``
(where held masks hold it). In eval mode (the expected weights) it is the identity.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

__all__ = ["LearnedRateDropout", "learned_dropouts", "plain_dropouts"]

TEMPERATURE = 0.1  # the Concrete relaxation's temperature (paper 002: t = 0.1)


class LearnedRateDropout(nn.Module):
    """Dropout at the rate ``rate()`` (before it is set: the network's own ``p``)."""

    def __init__(self, p: float, temperature: float = TEMPERATURE) -> None:
        super().__init__()
        self.p, self.temperature = float(p), float(temperature)
        self.rate: Callable[[], torch.Tensor | float] | None = None

    def current(self) -> torch.Tensor | float:
        return self.p if self.rate is None else self.rate()

    def value(self) -> float:
        """The present rate, a number."""
        rate = self.current()
        return float(rate.detach()) if isinstance(rate, torch.Tensor) else float(rate)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training:
            return x
        p = self.current()
        if isinstance(p, torch.Tensor) and p.requires_grad and torch.is_grad_enabled():
            eps = torch.finfo(x.dtype).eps
            u = torch.rand_like(x).clamp(eps, 1 - eps)
            p = p.to(x.dtype).clamp(eps, 1 - eps)
            drop = torch.sigmoid((p.log() - (1 - p).log() + u.log() - (1 - u).log()) / self.temperature)
            return x * (1 - drop) / (1 - p)
        rate = float(p)
        keep = torch.empty_like(x).bernoulli_(1 - rate)
        return x * keep / (1 - rate)

    def extra_repr(self) -> str:
        return f"p={self.value():.4g} (learned)"


def learned_dropouts(model: Any) -> dict[str, LearnedRateDropout]:
    """Put a :class:`LearnedRateDropout` in the converted ``model``'s copy of the network in place of
    each dropout module that alone makes a weight site's rate, and mark the site's layer as one whose
    rate a guide may learn; ``{site: module}``. Refused where there is none (nothing to learn)."""
    source = model.source_net
    found: dict[str, LearnedRateDropout] = {}
    for site, paths in model.rate_sources.items():
        if source is None or len(paths) != 1:  # a chain of dropouts: one rate for several modules
            continue
        parent, _, child = paths[0].rpartition(".")
        owner = source.get_submodule(parent) if parent else source
        module = LearnedRateDropout(float(owner.get_submodule(child).p))
        owner.add_module(child, module)  # (a ModuleDict's entry too)
        found[site] = module
        layer = model.net.get_submodule(site.removeprefix("net.").removesuffix(".weight"))
        layer.learnable_rate = True  # its site tells the guide: concrete=True may learn its rate
    if not found:
        raise ValueError(
            "MCDropout(concrete=True): no dropout module of the network masks a layer's inputs alone "
            "(an nn.Dropout right before an nn.Linear or a convolution, a LoRA adapter's lora_dropout), "
            "so there is no rate to learn"
        )
    return found


def plain_dropouts(net: nn.Module) -> nn.Module:
    """``net`` with each :class:`LearnedRateDropout` an ``nn.Dropout`` at its present rate (in place)."""
    for name, module in list(net.named_modules()):
        if isinstance(module, LearnedRateDropout):
            parent, _, child = name.rpartition(".")
            owner = net.get_submodule(parent) if parent else net
            setattr(owner, child, nn.Dropout(module.value()))
    return net
