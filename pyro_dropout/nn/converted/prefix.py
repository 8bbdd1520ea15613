r"""A converted network's forward split at its first dropout: the deterministic part once, the rest
per draw.

With its own masks (``masks="own"``) every draw of a chunk has the same weights, so whatever the
forward computes before any dropout (the convolutions of a LeNet whose dropout is before its last
layer) is the same for every draw. :class:`SplitForward` runs the network's ``torch.fx`` graph
(traced at conversion) over the converted modules: the nodes that no dropout reaches once, on the
``N`` rows, and the others on the draws' rows, each value they read from the first part repeated
along its batch dim (found by propagating two batch sizes). A graph whose batch dims cannot be
told, or whose split pass does not give the network's own outputs (dropout off, 1e-4), is not
split: the network then runs whole on the repeated rows (:mod:`.own`).
"""

from __future__ import annotations

import torch
from torch import fx, nn

from .placement import dropout_of

__all__ = ["SplitForward"]


def _draws_masks(module: nn.Module) -> bool:
    """Whether a module (with its submodules) draws a dropout mask when called."""
    for part in module.modules():
        if isinstance(part, nn.modules.dropout._DropoutNd) and part.p > 0:
            return True
        rates = (getattr(part, "dropout", 0), getattr(part, "step_dropout", 0))  # attention, recurrent
        if any(isinstance(r, int | float) and r > 0 for r in rates):
            return True
    return False


def _stochastic(net: nn.Module, node: fx.Node) -> bool:
    if node.op == "call_module":
        return _draws_masks(net.get_submodule(str(node.target)))
    if node.op == "call_function":
        if node.target is torch.nn.functional.scaled_dot_product_attention:
            return True  # its dropout_p may be a runtime value
        found = dropout_of(net, node)  # type: ignore[arg-type]
        return found is not None and found[0] > 0
    if node.op == "call_method":
        return node.target in ("dropout", "bernoulli", "bernoulli_", "uniform_", "normal_")
    return False


class SplitForward:
    """The graph of ``gm`` run over the modules of ``net`` in two parts (see the module's docs)."""

    def __init__(self, graph: fx.Graph, net: nn.Module, fixed: set[fx.Node]) -> None:
        self.net, self.graph, self.fixed = net, graph, fixed
        self.boundary = [n for n in fixed if any(u not in fixed for u in n.users)]
        self.batch_dims: dict[fx.Node, int] = {}

    @classmethod
    def of(cls, graph: fx.Graph | None, net: nn.Module) -> SplitForward | None:
        """The split of the forward ``graph``, where some computation precedes every dropout."""
        if graph is None or net._forward_hooks or net._forward_pre_hooks:
            return None  # no graph, or hooks of the whole network's call the graph would skip
        reached: set[fx.Node] = set()
        for node in graph.nodes:
            if _stochastic(net, node) or any(a in reached for a in node.all_input_nodes):
                reached.add(node)
        fixed = {n for n in graph.nodes if n not in reached and n.op != "output"}
        if not reached or not any(n.op in ("call_module", "call_function", "call_method") for n in fixed):
            return None  # no dropout, or one on the inputs: nothing to share
        return cls(graph, net, fixed)

    def _interpreter(self) -> fx.Interpreter:
        return fx.Interpreter(self.net, graph=self.graph)

    def prefix(self, x: torch.Tensor) -> dict[fx.Node, object]:
        """The values of the deterministic part on the rows ``x``."""
        interpreter = self._interpreter()
        interpreter.args_iter = iter([x])
        env: dict[fx.Node, object] = {}
        interpreter.env = env
        for node in self.graph.nodes:
            if node in self.fixed:
                env[node] = interpreter.run_node(node)
        return {n: env[n] for n in self.boundary}

    def rest(self, values: dict[fx.Node, object], count: int) -> object:
        """The network's output for ``count`` draws, from the deterministic part's ``values``."""
        env = {n: _repeat(v, count, self.batch_dims[n]) for n, v in values.items()}
        env |= {n: None for n in self.fixed if n not in env}  # read by no later node
        return self._interpreter().run(None, initial_env=env)

    def find_batch_dims(self, x: torch.Tensor) -> bool:
        """The batch dim of every value the two parts share, from the prefix on ``x[:2]`` and
        ``x[:3]`` (the dim whose size is the rows'); False where one is not a tensor or is unclear."""
        if len(x) < 3:
            x = x[:1].expand(3, *x.shape[1:])
        small, large = self.prefix(x[:2]), self.prefix(x[:3])
        for node in self.boundary:
            a, b = small[node], large[node]
            if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor) or a.dim() != b.dim():
                return False
            dims = [d for d in range(a.dim()) if a.shape[d] != b.shape[d]]
            if len(dims) != 1 or (a.shape[dims[0]], b.shape[dims[0]]) != (2, 3):
                return False
            self.batch_dims[node] = dims[0]
        return True


def _repeat(value: object, count: int, dim: int) -> object:
    """``count`` copies of ``value`` along ``dim``, draw-major (as the rows repeated at the input)."""
    if count == 1 or not isinstance(value, torch.Tensor):
        return value
    sizes = [1] * value.dim()
    sizes[dim] = count
    return value.repeat(*sizes)
