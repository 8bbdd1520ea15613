r"""The network's own forward, as its author wrote it, on the weights of one draw.

A converted network's layers are the library's (their weights are sample sites), so their classes
are not the network's: a forward that asks ``type(layer) != nn.Linear`` between its layers (a loop
over an ``nn.Sequential`` with ``F.dropout`` after every non-linear layer) reads another answer and
drops after every layer (an MC sd 1.45x the network's own). With its own masks
(``masks="own"``) every draw of a chunk has the same weights, so :class:`SourceForward` runs a copy
of the network that was never converted (its classes, its code, its modes as MC dropout runs it)
through :func:`torch.func.functional_call`, each converted layer's weight and bias put in for its
own parameters: the network's own computation, exactly, with the draw's weights. A recurrent
layer's sites map back to PyTorch's parameters (the library's LSTM has one bias per gate,
``b_ih + b_hh``, so ``bias_hh`` is zero).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

import torch
from torch import nn

from .fold import FoldedConv1d, FoldedConv2d, FoldedConv3d, FoldedGRU, FoldedLinear, FoldedLSTM
from .inputs import Inputs
from .loop import Draw, select_draw

__all__ = ["SourceForward"]

_PLAIN = (FoldedLinear, FoldedConv1d, FoldedConv2d, FoldedConv3d)
Link = tuple[str, Any, str | None]  # (the source's parameter, the converted layer, its site), None: zero


def _links(converted: nn.Module) -> Iterator[Link]:
    """Which sampled value stands for each parameter of the source network."""
    for path, module in converted.named_modules():
        prefix = f"{path}." if path else ""
        if isinstance(module, _PLAIN):
            yield f"{prefix}weight", module, "weight"
            if module.has_bias:
                yield f"{prefix}bias", module, "bias"
        elif isinstance(module, FoldedLSTM | FoldedGRU):
            for k, cell in enumerate(module.layers):
                ih, hh = cast(Any, cell).ih, cast(Any, cell).hh
                yield f"{prefix}weight_ih_l{k}", ih, "weight"
                yield f"{prefix}weight_hh_l{k}", hh, "weight"
                if ih.has_bias:
                    yield f"{prefix}bias_ih_l{k}", ih, "bias"
                    yield f"{prefix}bias_hh_l{k}", hh, "bias" if hh.has_bias else None


class SourceForward:
    """``source`` (the unconverted network) run with the sampled weights of the converted ``net``'s
    layers in place of its own parameters."""

    def __init__(self, source: nn.Module, net: nn.Module) -> None:
        self.source = source
        self.links = list(_links(net))

    def weights(self, cache: dict[str, torch.Tensor], sites: dict[str, int], draw: Draw | None) -> dict:
        """The source's parameters for draw ``draw`` (None: the sampled values, without draws)."""
        found: dict[str, torch.Tensor] = {}
        own = dict(self.source.named_parameters())
        for name, layer, attribute in self.links:
            if attribute is None:
                found[name] = torch.zeros_like(own[name])
                continue
            site = layer._pyro_get_fullname(attribute)
            found[name] = select_draw(cache[site], sites[site], draw)
        return found

    def __call__(self, weights: dict[str, torch.Tensor], x: Inputs) -> Any:
        return torch.func.functional_call(self.source, weights, x.args, x.kwargs)
