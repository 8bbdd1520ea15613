r"""A function recorded once as a graph of ATen operations (``make_fx`` on the real tensors), and
compiled: what reads no input and draws nothing computed once (:func:`fold_constants`), random draws
kept as operations. ``compile``: the loss *and* its gradient as one graph compiled by Inductor
(PyTorch's own random calls), the gradient handed to ``backward()``; kernels cached on disk
(``TORCHINDUCTOR_CACHE_DIR``).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, cast

import torch
from torch import fx

from ...guards import tensors_of, with_tensors

__all__ = ["fold_constants", "live_tensors", "mutated_tensors", "record_loss", "with_its_gradient"]


def _keeps_its_calls(node: fx.Node) -> bool:
    """A node computed at every call: a random draw, an in-place operation, an allocation, or
    anything but an ATen operation."""
    target: Any = node.target
    tags, packet = getattr(target, "tags", None), getattr(target, "overloadpacket", None)
    if tags is None or packet is None or getattr(target, "namespace", "") != "aten":
        return True  # a Python function or another library's operation: left as it is
    name = packet.__name__
    return torch.Tag.nondeterministic_seeded in tags or name.endswith("_") or name.startswith("empty")


_aten = torch.ops.aten
# operations that return their input unchanged when its shape is the one asked for
_SAME_SHAPE = {_aten.view.default, _aten.expand.default, _aten.reshape.default, _aten.squeeze.dim}


def _shape(gm: fx.GraphModule, node: Any) -> Any:
    if not isinstance(node, fx.Node):
        return None
    value = getattr(gm, str(node.target), None) if node.op == "get_attr" else node.meta.get("val")
    return tuple(value.shape) if isinstance(value, torch.Tensor) else None


def _drop_identities(gm: fx.GraphModule, detaches: bool) -> None:
    """Bypass every view, expansion or reshape of a tensor to its own shape, and every view of a
    view (``view(view(x, a), b)`` is ``view(x, b)``); with ``detaches`` (a graph run without
    gradients) every ``detach`` too: about a third of a prediction chunk's operations."""
    for node in gm.graph.nodes:
        if node.op != "call_function" or not node.args:
            continue
        source = node.args[0]
        if (detaches and node.target is _aten.detach.default) or (
            node.target in _SAME_SHAPE and _shape(gm, source) == _shape(gm, node) is not None
        ):
            node.replace_all_uses_with(source)
        elif node.target is _aten.view.default and getattr(source, "target", None) is _aten.view.default:
            node.args = (source.args[0], *node.args[1:])


def fold_constants(gm: fx.GraphModule, detaches: bool = False) -> fx.GraphModule:
    """``gm`` with every node that reads no input and draws, mutates or allocates nothing replaced
    by its value, computed once; its identities bypassed (:func:`_drop_identities`; ``detaches``:
    the graph runs without gradients); the nodes no output needs removed."""
    values: dict[fx.Node, Any] = {}
    moving = {
        a
        for n in gm.graph.nodes
        if n.op == "call_function" and _keeps_its_calls(n)
        for a in n.all_input_nodes
    }
    for node in gm.graph.nodes:
        if node.op == "get_attr" and node not in moving:
            values[node] = getattr(gm, str(node.target))
        elif node.op == "call_function" and not _keeps_its_calls(node):
            if all(a in values for a in node.all_input_nodes):
                args = fx.node.map_arg(node.args, values.__getitem__)
                kwargs = fx.node.map_arg(node.kwargs, values.__getitem__)
                values[node] = node.target(*args, **kwargs)
    for index, node in enumerate([n for n in values if n.op == "call_function"]):
        value = values[node]
        if isinstance(value, torch.Tensor) and any(user not in values for user in node.users):
            name = f"_computed_{index}"
            gm.register_buffer(name, value.detach())
            with gm.graph.inserting_before(node):
                node.replace_all_uses_with(gm.graph.get_attr(name))
    _drop_identities(gm, detaches)
    gm.graph.eliminate_dead_code()
    gm.recompile()
    return gm


def _with_gradient(fn: Callable[..., torch.Tensor], live: list[bool]) -> Callable[..., tuple]:
    """``fn``'s value and its gradient with respect to its first inputs, zero where ``live`` is False
    (a frozen parameter)."""

    def value_and_gradient(*inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        params = inputs[: len(live)]
        value = fn(*inputs)
        wanted = [p for p, keep in zip(params, live, strict=True) if keep]
        found = iter(torch.autograd.grad(value, wanted, allow_unused=True))
        grads = [next(found) if keep else None for keep in live]
        return value.detach(), *(
            torch.zeros_like(p) if g is None else g for p, g in zip(params, grads, strict=True)
        )

    return value_and_gradient


def with_its_gradient(value: Any, params: tuple[torch.Tensor, ...]) -> Any:
    """A scalar loss's value whose gradient with respect to ``params`` is computed now and handed out
    by its ``backward()``: what its autograd graph saved (a batch norm's running statistics) may then
    change in place before the caller back-propagates it. Anything else is returned as it is."""
    wanted = [p for p in params if p.requires_grad]
    if not (isinstance(value, torch.Tensor) and value.dim() == 0 and value.requires_grad and wanted):
        return value
    found = iter(torch.autograd.grad(value, wanted, allow_unused=True))
    grads = [(next(found) if p.requires_grad else None) for p in params]
    grads = [torch.zeros_like(p) if g is None else g for p, g in zip(params, grads, strict=True)]
    return _LossWithGradient.apply(lambda *_: (value.detach(), *grads), len(params), *params)


class _LossWithGradient(torch.autograd.Function):
    """A compiled graph's value, whose backward hands out the gradient computed with it."""

    @staticmethod
    def forward(ctx: Any, compiled: Callable, num_params: int, *inputs: torch.Tensor) -> torch.Tensor:
        value, *grads = compiled(*inputs)
        ctx.grads, ctx.num_inputs = grads, len(inputs)
        return cast(torch.Tensor, value)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, upstream: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        grads = [upstream * g for g in ctx.grads]
        return None, None, *grads, *([None] * (ctx.num_inputs - len(grads)))


def live_tensors(graph: Any) -> list[torch.Tensor]:
    """The tensors a recorded graph reads when it runs, besides its inputs (captured buffers it did
    not fold, and what it folded): their in-place changes reach the graph, so no guard reads their
    versions."""
    module = getattr(graph, "recorded_module", graph)
    return [*module.buffers()] + [
        getattr(module, str(n.target))
        for n in module.graph.nodes
        if n.op == "get_attr" and isinstance(getattr(module, str(n.target), None), torch.Tensor)
    ]


def mutated_tensors(graph: Any) -> list[torch.Tensor]:
    """The captured tensors a recorded graph changes in place when it runs (a batch norm's running
    statistics)."""
    module = getattr(graph, "recorded_module", graph)
    found = []
    for node in module.graph.nodes:
        name = getattr(getattr(node.target, "overloadpacket", None), "__name__", "")
        first = node.args[0] if node.args else None
        if name.endswith("_") and isinstance(first, fx.Node) and first.op == "get_attr":
            found.append(getattr(module, str(first.target)))
    return found


def record_loss(
    fn: Callable[..., Any],
    args: tuple,
    kwargs: dict,
    params: tuple[torch.Tensor, ...],
    compile: bool,
    detaches: bool = False,
) -> tuple[Callable[..., Any] | None, str]:
    """``fn(*args, **kwargs)`` recorded as a function of ``(*params, *tensors of the arguments)``
    (``params``: the parameters ``fn`` reads itself, from Pyro's param store, as these very tensors),
    compiled where ``compile``, its first call made; ``(None, why)`` where recording or compiling
    fails, or the graph computes a shape from values (``detaches``: see :func:`fold_constants`). Run
    it where random draws and in-place changes are undone after: the recording and the first call
    draw."""
    from torch.fx.experimental.proxy_tensor import make_fx

    num_params = len(params)
    inputs = (*params, *tensors_of(args, kwargs))

    def of_inputs(*given: torch.Tensor) -> Any:
        call_args, call_kwargs = with_tensors(args, kwargs, given[num_params:])
        return fn(*call_args, **call_kwargs)

    live = [t.requires_grad for t in params]
    differentiable = compile and any(live)
    target = _with_gradient(of_inputs, live) if differentiable else of_inputs
    try:
        module = fold_constants(make_fx(target, tracing_mode="real")(*inputs), detaches)
    except Exception as error:  # Python the recorder cannot follow
        return None, f"recording the loss failed ({_first_line(error)})"
    if any(map(_depends_on_values, module.graph.nodes)):
        return None, "the loss computes a shape from a tensor's values"
    run: Callable[..., Any] = module
    if compile:
        run = torch.compile(module, dynamic=False, fullgraph=True, options={"fallback_random": True})
        if differentiable:
            run = partial(_LossWithGradient.apply, run, num_params)
    try:  # the first call compiles, in the grad mode of the calls after it
        run(*inputs)
    except Exception as error:  # no compiler, an operation Inductor cannot lower, ...
        return None, f"torch.compile failed ({_first_line(error)})"
    if run is not module:
        run = _Compiled(run, module)
    return run, ""


class _Compiled:
    """A compiled graph, with the module it was compiled from (whose tensors it reads)."""

    def __init__(self, run: Callable[..., Any], module: fx.GraphModule) -> None:
        self.run, self.recorded_module = run, module

    def __call__(self, *inputs: torch.Tensor) -> Any:
        return self.run(*inputs)


def _depends_on_values(node: fx.Node) -> bool:
    """A node whose output's shape depends on its input's values (a boolean mask's selection)."""
    target: Any = node.target
    tags = getattr(target, "tags", ())
    if torch.Tag.dynamic_output_shape not in tags and torch.Tag.data_dependent_output not in tags:
        return False
    if target is torch.ops.aten.index.Tensor:
        indices = node.args[1] if len(node.args) > 1 else ()
        values = [getattr(i, "meta", {}).get("val") for i in indices if i is not None]  # type: ignore[union-attr]
        return any(isinstance(v, torch.Tensor) and v.dtype in (torch.bool, torch.uint8) for v in values)
    return True


def _first_line(error: Exception) -> str:
    return f"{type(error).__name__}: {(str(error).strip() or 'no message').splitlines()[0][:200]}"
