r"""Where each dropout of a network goes when it is converted, read from its ``torch.fx`` graph.

A dropout is the variational family of the weight layer it feeds when its mask is exactly a mask
of that layer's input units: an element dropout (``nn.Dropout``, ``F.dropout``) whose output
reaches an ``nn.Linear`` through ReLUs and flattens only, or a channel dropout
(``nn.Dropout1d/2d/3d``) whose output reaches a convolution with ``groups=1`` through ReLUs and
pooling only (each multiplies a unit by ``z / (1 - p) >= 0``, so it commutes with them); the
output goes nowhere else, the dropout module and the layer each run once. With ``masks="own"``
this gives the layer's weight the KL of that rate (the module itself still draws the masks);
with ``masks="shared"`` the dropout becomes the layer's family, and every other dropout stays where
it is, as a mask site (:class:`~pyro_dropout.nn.converted.dropout_sites.ModuleDropout`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import fx, nn

from .dropout_sites import ModuleDropout
from .rules import refuse_reused_dropouts

__all__ = [
    "CHANNEL_DROPOUTS",
    "ELEMENT_DROPOUTS",
    "Placement",
    "dropout_of",
    "place_dropouts",
    "refuse_alpha_dropout",
    "share_dropouts",
]

ELEMENT_DROPOUTS = (nn.Dropout,)
CHANNEL_DROPOUTS = (nn.Dropout1d, nn.Dropout2d, nn.Dropout3d)
_FUNCTIONAL = {
    F.dropout: False,
    torch.dropout: False,
    F.dropout1d: True,
    F.dropout2d: True,
    F.dropout3d: True,
}
_ALPHA = {F.alpha_dropout, F.feature_alpha_dropout, torch.alpha_dropout, torch.feature_alpha_dropout}
_ALPHA_MODULES = (nn.AlphaDropout, nn.FeatureAlphaDropout)
_POSITIVE = (nn.ReLU, nn.LeakyReLU, nn.Identity)
_POSITIVE_FUNCTIONS = {F.relu, torch.relu, F.leaky_relu, torch.nn.functional.relu_}
_POOLS: tuple[type, ...] = (
    nn.MaxPool1d,
    nn.MaxPool2d,
    nn.MaxPool3d,
    nn.AvgPool1d,
    nn.AvgPool2d,
    nn.AvgPool3d,
)
_POOLS += (nn.AdaptiveAvgPool1d, nn.AdaptiveAvgPool2d, nn.AdaptiveAvgPool3d, nn.AdaptiveMaxPool1d)
_POOLS += (nn.AdaptiveMaxPool2d, nn.AdaptiveMaxPool3d)
_POOL_FUNCTIONS = {F.max_pool1d, F.max_pool2d, F.max_pool3d, F.avg_pool1d, F.avg_pool2d, F.avg_pool3d}


@dataclass
class Placement:
    """What :func:`place_dropouts` decided: each weight layer's rate, and the dropouts (module
    names, or graph nodes of functional ones) that stay as mask sites, with ``(p, channels)``."""

    rates: dict[str, float] = field(default_factory=dict)
    sites: dict[Any, tuple[float, bool]] = field(default_factory=dict)
    placed: list[Any] = field(default_factory=list)  # dropouts that became a layer's family
    # the dropout modules whose masks make a layer's rate (every one a module: a rate to learn)
    sources: dict[str, list[str]] = field(default_factory=dict)


def dropout_of(gm: fx.GraphModule, node: fx.Node) -> tuple[float, bool] | None:
    """``(p, channels)`` of a dropout node (a module or a functional call); ``None`` otherwise
    (alpha dropout too: it has no Bernoulli-mask family, :func:`refuse_alpha_dropout`)."""
    if node.op == "call_module":
        module = gm.get_submodule(str(node.target))
        if isinstance(module, ELEMENT_DROPOUTS + CHANNEL_DROPOUTS) and not isinstance(module, _ALPHA_MODULES):
            return float(module.p), isinstance(module, CHANNEL_DROPOUTS)
        return None
    if node.op != "call_function" or node.target not in _FUNCTIONAL:
        return None
    p = node.kwargs.get("p", node.args[1] if len(node.args) > 1 else 0.5)
    if not isinstance(p, int | float):
        raise ValueError(
            f"from_module: the dropout rate at '{node.name}' in the forward is not a number ({p!r})"
        )
    training = node.kwargs.get("training", node.args[2] if len(node.args) > 2 else True)
    return (float(p) if training is not False else 0.0), _FUNCTIONAL[node.target]


def refuse_alpha_dropout(gm: fx.GraphModule) -> None:
    """With ``masks="shared"``: refuse alpha dropout (SELU networks), which has no Bernoulli-mask
    family (with ``masks="own"`` it draws as the network does)."""
    for node in gm.graph.nodes:
        module = gm.get_submodule(str(node.target)) if node.op == "call_module" else None
        if isinstance(module, _ALPHA_MODULES) and module.p > 0:
            raise ValueError(
                f"from_module(masks='shared'): '{node.target}' is an {type(module).__name__}; alpha "
                "dropout (SELU networks) has no Bernoulli-mask family to share: convert with masks='own' "
                "(the default), where it draws as the network does, or set its p to 0"
            )
        if node.op == "call_function" and node.target in _ALPHA:
            raise ValueError(
                f"from_module(masks='shared'): the forward calls {node.target.__name__} at '{node.name}'; "
                "alpha dropout has no Bernoulli-mask family to share: convert with masks='own' (the default)"
            )


def _passes(gm: fx.GraphModule, node: fx.Node, channels: bool) -> bool:
    """Whether ``node`` commutes with a mask of its input's units (element or channel masks)."""
    if node.op == "call_module":
        module = gm.get_submodule(str(node.target))
        if isinstance(module, _POSITIVE):
            return True
        if channels:
            return isinstance(module, _POOLS)
        return isinstance(module, nn.Flatten) and module.start_dim == 1 and module.end_dim == -1
    if node.op == "call_function":
        if node.target in _POSITIVE_FUNCTIONS:
            return True
        if channels:
            return node.target in _POOL_FUNCTIONS
        start = node.kwargs.get("start_dim", node.args[1] if len(node.args) > 1 else 0)
        return bool(node.target is torch.flatten and start == 1 and len(node.args) <= 2)
    if node.op == "call_method":
        return node.target in ("relu", "relu_") or (
            not channels and node.target == "flatten" and tuple(node.args[1:]) == (1,)
        )
    return False


def _target(
    gm: fx.GraphModule, node: fx.Node, channels: bool, convertible: set[str], calls: dict[str, int]
) -> bool:
    if node.op != "call_module" or str(node.target) not in convertible or calls[str(node.target)] != 1:
        return False
    module = gm.get_submodule(str(node.target))
    if channels:
        return isinstance(module, nn.Conv1d | nn.Conv2d | nn.Conv3d) and module.groups == 1
    return isinstance(module, nn.Linear)


def _called_again(node: fx.Node, calls: dict[str, int]) -> bool:
    """A dropout module called more than once: each call draws its own masks, so no call is the
    mask of one layer's weight (the module stays where it is)."""
    return node.op == "call_module" and calls.get(str(node.target), 0) > 1


def place_dropouts(gm: fx.GraphModule, convertible: set[str]) -> Placement:
    """Decide, for every dropout of ``gm``'s graph, whether it becomes the rate of a convertible
    layer (named in ``convertible``) or stays a mask site."""
    calls: dict[str, int] = {}
    for node in gm.graph.nodes:
        if node.op == "call_module":
            calls[str(node.target)] = calls.get(str(node.target), 0) + 1
    placement, done = Placement(), set()
    for node in gm.graph.nodes:
        found = dropout_of(gm, node)
        if found is None or node in done:
            continue
        p, channels = found
        chain, keep, cur = [node], 1.0 - p, node
        while len(cur.users) == 1 and not _called_again(node, calls):
            user = next(iter(cur.users))
            if not user.args or user.args[0] is not cur:
                break
            nxt = dropout_of(gm, user)
            if nxt is not None and nxt[1] == channels and not _called_again(user, calls):
                chain.append(user)
                keep *= 1.0 - nxt[0]
            elif _target(gm, user, channels, convertible, calls):
                placement.rates[str(user.target)] = 1.0 - keep
                placement.placed += chain
                if all(member.op == "call_module" for member in chain):
                    placement.sources[str(user.target)] = [str(member.target) for member in chain]
                break
            elif not _passes(gm, user, channels):
                break
            cur = user
        done.update(chain)
        if chain[0] not in placement.placed:
            for member in chain:
                rate, kind = dropout_of(gm, member) or (0.0, channels)
                if rate > 0:
                    placement.sites[member] = (rate, kind)
    return placement


def _edit_graph(gm: fx.GraphModule, placement: Placement) -> tuple[bool, list[str]]:
    """Remove the functional dropouts that became a layer's rate and make the others mask sites;
    ``(whether the graph changed, the mask sites added)``."""
    sites, count, edited = [], 0, False
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or dropout_of(gm, node) is None:
            continue
        if node in placement.sites:
            p, channels = placement.sites[node]
            name = f"dropout{count}"
            count += 1
            gm.add_submodule(name, ModuleDropout(p, channels, f"{node.name} in the forward"))
            with gm.graph.inserting_after(node):
                new = gm.graph.call_module(name, (node.args[0],))
            node.replace_all_uses_with(new)
            sites.append(name)
        else:
            node.replace_all_uses_with(node.args[0])
        gm.graph.erase_node(node)
        edited = True
    gm.recompile()
    return edited, sites


def share_dropouts(
    net: nn.Module, gm: fx.GraphModule | None, placement: Placement
) -> tuple[nn.Module, list[str], set[str]]:
    """With ``masks="shared"``: the forward with its functional dropouts placed or made mask sites
    (the traced graph, where it changed), those mask sites, and the dropout modules placed."""
    if gm is None:
        return net, [], set()
    refuse_reused_dropouts(gm)
    refuse_alpha_dropout(gm)
    placed = {str(n.target) for n in placement.placed if n.op == "call_module"}
    edited, mask_sites = _edit_graph(gm, placement)
    return gm if edited else net, mask_sites, placed
