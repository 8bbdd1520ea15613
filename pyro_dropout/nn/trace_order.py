"""The order in which a network runs its layers and dropouts, read from its forward by ``torch.fx``.

:func:`~pyro_dropout.nn.from_module` gives each weight layer the rate of the dropouts that run
before it. Tracing the forward finds functional dropouts (``F.dropout(h, 0.3, self.training)``)
as well as ``nn.Dropout`` modules, in the order they run, and removes the functional ones (the
guide's masks take their place). A forward that cannot be traced (data-dependent control flow)
falls back to the order the modules are registered in, with a warning.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["Step", "run_order"]

Step = tuple[str, Any]  # ("module", dotted name) or ("dropout", p) of a functional dropout

_FUNCTIONAL = {F.dropout, F.dropout1d, F.dropout2d, F.dropout3d, torch.dropout}


def _functional_rate(node: Any) -> float | None:
    if node.op != "call_function" or node.target not in _FUNCTIONAL:
        return None
    p = node.kwargs.get("p", node.args[1] if len(node.args) > 1 else 0.5)
    if not isinstance(p, int | float):
        raise ValueError(
            f"from_module: the dropout rate at '{node.name}' in the forward is not a number ({p!r})"
        )
    return float(p)


def _traced(net: nn.Module) -> tuple[nn.Module, list[Step]]:
    graph_module = torch.fx.symbolic_trace(net)
    order: list[Step] = []
    for node in list(graph_module.graph.nodes):
        rate = _functional_rate(node)
        if rate is not None:
            order.append(("dropout", rate))
            node.replace_all_uses_with(node.args[0])
            graph_module.graph.erase_node(node)
        elif node.op == "call_module":
            order.append(("module", node.target))
    if not any(kind == "dropout" for kind, _ in order):
        return net, order  # nothing to remove: keep the network as it is (an nn.Sequential stays one)
    graph_module.recompile()
    return graph_module, order


def run_order(net: nn.Module) -> tuple[nn.Module, list[Step]]:
    """``(net, steps)``: the network with its functional dropouts removed (a ``GraphModule`` with
    the same submodules, where there were any; else ``net``), and its modules and dropouts in the
    order they run."""
    try:
        return _traced(net)
    except Exception as error:  # torch.fx raises many kinds on a forward it cannot follow
        warnings.warn(
            f"from_module: could not trace the forward of {type(net).__name__} ({type(error).__name__}: "
            f"{error}); dropout layers apply to the next weight layer in the order the modules are "
            "registered, and a functional dropout in the forward is not seen",
            stacklevel=3,
        )
        return net, [("module", name) for name, _ in net.named_modules() if name]
