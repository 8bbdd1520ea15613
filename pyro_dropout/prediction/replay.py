r"""A chunk of predictive draws as one traced function: the guide, the model and the collection of
the draws recorded once with :func:`torch.jit.trace` and replayed for every later chunk of the same
size, so that the Python of Pyro's effect handlers runs once per call of :func:`predict`, not once
per chunk. Small chunks (which keep a layer's output in the CPU's cache) then cost no more than
large ones.

The trace is only used where it is safe:

* a pass that reads a tensor's value into a Python number (``float(t)``, ``t.item()``: the tracer
  warns of it) would be frozen at that number, so such a model runs eagerly;
* the first traced chunk is checked against the eager pass from the same random state; a
  mismatch runs eagerly too (after a second try without the folded shape arithmetic). A Python
  branch on a draw's value (``if (mask == 0).all():``) that happens to go the same way in that
  chunk is not caught: pass ``jit=False`` for such a model.

Random draws are ops of the trace, made afresh on every call, in the order of the eager pass: from
the same seed the draws are those of the eager path.

A trace is kept with the guide it was made for (at most :data:`MAX_KEPT_TRACES` per guide, freed
with it) and used again by a later call with the same model, chunk size, sites, input shapes and
parameter tensors. Each call checks it as a new trace is checked, against the eager pass from the
same random state, and traces afresh where they differ (a model whose Python settings changed).
"""

from __future__ import annotations

import warnings
import weakref
from collections.abc import Callable, Hashable
from typing import Any

import pyro
import torch

from ..infer.fast.traced import (
    TensorSlots,
    call_key,
    forked_rng,
    rng_state,
    set_rng_state_on,
    static_key,
    trace_loss,
)
from .chunks import ChunkRunner
from .collect import Outputs, chunk_outputs
from .draws import Predictions

__all__ = ["MAX_KEPT_TRACES", "TracedChunk", "leaf_params", "trace_chunk"]

MAX_KEPT_TRACES = 4  # traces kept per guide (each holds its graph: a few MB), the oldest dropped first
_KEPT: weakref.WeakKeyDictionary[Any, dict[Hashable, Any]] = weakref.WeakKeyDictionary()

# a tensor's value read into Python (``float(t)``, ``t.item()``); the tracer also warns of the
# shape comparisons it records as Python booleans, which are safe: a trace is reused for one shape
_VALUE_DEPENDENT = ("to a Python float", "to a Python number")


class TracedChunk:
    """Calls of the traced chunk: each returns the :data:`Outputs` of ``size`` fresh draws."""

    def __init__(self, fn: Callable[..., Any], keys: list, inputs: tuple, size: int):
        self.fn, self.keys, self.inputs, self.size = fn, keys, inputs, size

    def __call__(self) -> Outputs:
        return dict(zip(self.keys, _call(self.fn, self.inputs), strict=True))


def _call(fn: Callable[..., Any], inputs: tuple) -> tuple[torch.Tensor, ...]:
    # a trace does not record the pass's no_grad, and returns a view of a parameter (a point-mass
    # bias, expanded) as one that requires grad: detached, as the eager pass gives them
    with torch.no_grad():
        return tuple(t.detach() for t in fn(*inputs))


def leaf_params(*owners: Any) -> list[torch.Tensor]:
    """The parameters a pass may read: Pyro's parameter store and those of the ``owners`` that are
    modules. They enter the trace as inputs (the tracer takes no constant that requires grad)."""
    found = {id(t): t for _, t in pyro.get_param_store().named_parameters()}
    for owner in owners:
        if isinstance(owner, torch.nn.Module):
            found.update({id(t): t for t in owner.parameters()})
    return list(found.values())


def _body(
    runner: ChunkRunner, size: int, wanted: set[str] | None, keys: list, params: list[torch.Tensor]
) -> tuple[Callable[..., tuple[torch.Tensor, ...]], tuple[torch.Tensor, ...]]:
    """The chunk's pass as a function of tensors, and the tensors it takes: the parameters, then
    the tensors among the runner's arguments."""
    slots = TensorSlots(runner.args, runner.kwargs)

    def body(*inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        # the parameters are read where the pass reads them; the other inputs are its arguments
        args, kwargs = slots.put(runner.args, runner.kwargs, inputs[len(params) :])
        trace, latents = runner.run(size, args, kwargs)
        outputs = chunk_outputs(Predictions(), trace, latents, wanted, runner.nesting, size)
        return tuple(outputs[k] for k in keys)

    return body, (*params, *slots.tensors(runner.args, runner.kwargs))


def _specialise(fn: Any, inputs: tuple) -> None:
    """Fold the trace's shape arithmetic for the one set of input shapes it serves: the tracer
    records every size a pass reads as an op (441 graph nodes for the UCI net's chunk, 191 after
    these passes of TorchScript). Skipped where this PyTorch lacks them; the check of the first
    call covers what they change."""
    keep = getattr(fn, "keep", None)
    if keep is None:
        return
    internals: Any = torch._C  # TorchScript's graph passes carry no type hints
    graph = keep[1].forward.graph
    try:
        internals._jit_pass_inline(graph)
        internals._jit_pass_complete_shape_analysis(graph, tuple(inputs), False)
        internals._jit_pass_peephole(graph, False)
        internals._jit_pass_constant_propagation(graph)
        internals._jit_pass_dce(graph)
    except (AttributeError, RuntimeError, TypeError):
        return


def _same(expected: tuple[torch.Tensor, ...], got: tuple[torch.Tensor, ...]) -> bool:
    return len(expected) == len(got) and all(
        e.shape == g.shape and torch.allclose(e, g, rtol=1e-4, atol=1e-6, equal_nan=True)
        for e, g in zip(expected, got, strict=True)
    )


def trace_chunk(
    runner: ChunkRunner,
    size: int,
    wanted: set[str] | None,
    keys: list,
    device: torch.device,
    params: list[torch.Tensor],
    owner: Any = None,
) -> tuple[TracedChunk, Outputs] | None:
    """The traced chunk and the draws of its first (checked) call, which move the random state on
    as one eager chunk would; None (the state untouched) where the model must run eagerly. A trace
    kept with ``owner`` (the guide) for the same call is checked and used first; otherwise the trace
    with its shape arithmetic folded is tried, then the plain one."""
    body, inputs = _body(runner, size, wanted, keys, params)
    if not inputs:
        return None
    kept, key = _kept_for(owner), _key(runner, size, wanted, keys, params)
    if kept is not None and key in kept:
        fn = kept.pop(key)
        drawn = _check(body, fn, inputs, keys, device)
        if drawn is not None:
            kept[key] = fn  # the most recently used last
            return TracedChunk(fn, keys, inputs, size), drawn
    for specialise in (True, False):
        fn = _trace(body, inputs, device, specialise)
        drawn = None if fn is None else _check(body, fn, inputs, keys, device)
        if drawn is not None:
            _keep(kept, key, fn)
            return TracedChunk(fn, keys, inputs, size), drawn
    return None


def _kept_for(owner: Any) -> dict[Hashable, Any] | None:
    """The traces kept with ``owner``; None where it cannot hold them (None, or no weak reference)."""
    if owner is None:
        return None
    try:
        return _KEPT.setdefault(owner, {})
    except TypeError:
        return None


def _key(runner: ChunkRunner, size: int, wanted: set[str] | None, keys: list, params: list) -> Hashable:
    """What a kept trace must share with a call: the model, the chunk, the sites, the arguments'
    shapes (and other values) and the very parameter tensors."""
    return (
        id(runner.model),
        size,
        None if wanted is None else frozenset(wanted),
        tuple(keys),
        call_key(runner.args, runner.kwargs),
        tuple((id(p), static_key(p)) for p in params),
    )


def _keep(kept: dict[Hashable, Any] | None, key: Hashable, fn: Any) -> None:
    if kept is None:
        return
    kept[key] = fn
    while len(kept) > MAX_KEPT_TRACES:
        del kept[next(iter(kept))]


_UNTRACEABLE = (RuntimeError, TypeError, ValueError, AttributeError, IndexError, NotImplementedError)


def _trace(body: Callable, inputs: tuple, device: torch.device, specialise: bool) -> Any:
    """The trace of ``body``, made on a forked random state; None where the pass reads a tensor's
    value into Python or the tracer cannot record it."""
    try:
        with (
            warnings.catch_warnings(record=True) as caught,
            forked_rng(device),
            pyro.validation_enabled(False),
        ):
            warnings.simplefilter("always")
            fn = trace_loss(body, inputs)
            if specialise:  # after one call, which gives the graph the types the passes read
                _call(fn, inputs)
                _specialise(fn, inputs)
    except _UNTRACEABLE:
        return None  # what the tracer cannot record runs eagerly, as before
    if any(any(m in str(w.message) for m in _VALUE_DEPENDENT) for w in caught):
        return None
    return fn


def _check(body: Callable, fn: Any, inputs: tuple, keys: list, device: torch.device) -> Outputs | None:
    """The draws of ``fn`` where they equal the eager pass's from the same random state (the state
    then moved on as one chunk moves it); None, the state untouched, where they do not."""
    state = rng_state(device)
    try:
        with pyro.validation_enabled(False):
            expected = body(*inputs)
        set_rng_state_on(state, device)
        got = _call(fn, inputs)
    except _UNTRACEABLE:
        got = None
    if got is None or not _same(expected, got):
        set_rng_state_on(state, device)
        return None
    return dict(zip(keys, got, strict=True))
