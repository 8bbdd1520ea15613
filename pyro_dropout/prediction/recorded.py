r"""A chunk of draws recorded once and replayed: prediction on the one fast path.

An eager chunk costs a few milliseconds of Pyro's Python (handlers, distributions, the collection
of the draws) whatever its size, so the many small chunks that fit the cache would cost more than
the cache saves. :class:`ChunkGraphs` records a chunk's pass (the guide's draws, the model, the
outputs kept) with ``make_fx`` into a graph of ATen operations per chunk size, input shape and
state of the model and guide, kept with the guide, and replays it for the next chunks; the random
draws stay operations, so each chunk draws fresh masks from the same generator calls as the eager
chunk. What reads no input and draws nothing (the weights' transforms, a prior's constants) is
computed once.

A graph is never trusted blindly. It is made from an eager chunk, run again from that chunk's
random state, and kept only where its outputs and the generator's state after it are the eager
chunk's; a chunk whose Python reads a tensor's value is not recorded. Then the first chunk of
every call runs eagerly beside the graph from the same random state, and a graph that differs is
dropped and the rest of the call runs eagerly: a global or a closure changed between calls is found
at the first chunk of the call. Within a call of :func:`~.predict` no code of the caller runs
between chunks, and the modules' values and the parameters are read at every chunk; the chunks of
:func:`~.predict_chunks` are handed to the caller one by one, so every 64th is checked as well (a
global changed between them is found within 64 chunks).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable
from typing import Any

import pyro
import torch

from ..infer.recorded.checks import same, set_torch_rng, torch_rng
from ..infer.recorded.graph import TensorSlots, call_key
from ..infer.recorded.reads import ValueReads
from ..infer.recorded.record import fold_constants
from ..infer.recorded.state import StateWatch
from .chunks import ChunkRunner
from .collect import Outputs
from .draw_cost import per_draw_bytes
from .draws import Predictions

__all__ = ["CHECK_EVERY", "ChunkGraphs", "chunk_graphs"]

CHECK_EVERY = 64  # chunks between two checks in a stream (predict_chunks); the first of each call is checked
RECORD_FROM = 24  # chunks of one size in a call from which recording pays (it costs about four chunks)
_KEPT: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def chunk_graphs(guide: Any, model: Any) -> ChunkGraphs | None:
    """The recorded chunks kept with ``guide`` (None for a guide that cannot hold them)."""
    try:
        graphs = _KEPT.get(guide)
        if graphs is None:
            graphs = _KEPT[guide] = ChunkGraphs(StateWatch(model, guide))
        return graphs
    except TypeError:  # not weakly referable
        return None


def _store_versions() -> Hashable:
    store = pyro.get_param_store()
    return tuple((name, p._version) for name, p in store.named_parameters())  # the unconstrained values


Run = Callable[[tuple, dict, Any], Outputs]  # one eager chunk on (args, kwargs), filling a Predictions


class ChunkGraphs:
    """The graphs of one guide's chunks, by chunk size and input shape, for the model's and guide's
    state and parameter values of ``now`` (a graph holds those values, so a change of either drops
    them all: training between calls does not pile up graphs); ``eager``: the keys that run eagerly;
    ``widths``: what a draw adds to a chunk (:func:`~.draw_cost.per_draw_bytes`), by input shape."""

    def __init__(self, watch: StateWatch) -> None:
        self.watch = watch
        self.now: Hashable = None
        self.graphs: dict[Hashable, tuple[Callable, tuple]] = {}
        self.calls: dict[Hashable, int] = {}
        self.eager: set[Hashable] = set()
        self.widths: dict[Hashable, int | None] = {}

    def per_draw_bytes(self, runner: ChunkRunner, warm_up: bool) -> int | None:
        """:func:`~.draw_cost.per_draw_bytes`, measured once per input shape and state (six draws'
        eager passes a call saved)."""
        key = self._key(0, runner.args, runner.kwargs)
        if key not in self.widths:
            self.widths[key] = per_draw_bytes(runner, warm_up)
        return self.widths[key]

    def _key(self, size: int, args: tuple, kwargs: dict) -> Hashable:
        now = (self.watch(), _store_versions())
        if now != self.now:
            self.now = now
            self.graphs.clear()
            self.calls.clear()
            self.eager.clear()
            self.widths.clear()
        return size, call_key(args, kwargs)

    def outputs(
        self,
        size: int,
        count: int,
        args: tuple,
        kwargs: dict,
        run: Run,
        meta: Any,
        first: bool,
        streamed: bool = False,
    ) -> Outputs:
        """One chunk's outputs: from its graph where one is kept and trusted, else from ``run`` (which
        records one where the call has at least :data:`RECORD_FROM` chunks of this ``size``:
        ``count``); ``first``: the call's first chunk, checked (and describing the sites in ``meta``);
        ``streamed``: chunks handed to the caller one by one, every :data:`CHECK_EVERY`\\ th checked too."""
        key = self._key(size, args, kwargs)
        if key in self.eager or (key not in self.graphs and count < RECORD_FROM):
            return run(args, kwargs, meta)
        slots = TensorSlots(args, kwargs)
        tensors = slots.tensors(args, kwargs)
        device = tensors[0].device if tensors else torch.device("cpu")
        if key not in self.graphs:
            return self._record(key, args, kwargs, slots, run, meta, device)
        graph, names = self.graphs[key]
        calls = self.calls[key] = self.calls[key] + 1
        if not first and (not streamed or calls % CHECK_EVERY):
            return dict(zip(names, graph(*tensors), strict=True))
        start = torch_rng(device)
        replayed = dict(zip(names, graph(*tensors), strict=True))
        after = torch_rng(device)
        set_torch_rng(start, device)
        expected = run(args, kwargs, meta)
        if not (_agree(replayed, expected) and _same_state(after, torch_rng(device))):
            del self.graphs[key]  # stale (a global or a closure changed): eager from here on
            self.eager.add(key)
        return expected

    def _record(
        self, key: Hashable, args: tuple, kwargs: dict, slots: TensorSlots, run: Run, meta: Any, device: Any
    ) -> Outputs:
        """The eager chunk; and its graph kept where it gives the eager chunk's draws."""
        start = torch_rng(device)
        expected = run(args, kwargs, meta)  # as the user has Pyro's validation
        end = torch_rng(device)
        set_torch_rng(start, device)
        with ValueReads() as reads, pyro.validation_enabled(False):  # validation reads values
            run(args, kwargs, Predictions())
        if reads.first is None:
            names = tuple(expected)

            def chunk(*tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
                outputs = run(*slots.put(args, kwargs, tensors), Predictions())  # a scratch description
                return tuple(outputs[n] for n in names)

            graph = _make_graph(chunk, slots.tensors(args, kwargs), start, device)
            if graph is not None:
                set_torch_rng(start, device)
                replayed = dict(zip(names, graph(*slots.tensors(args, kwargs)), strict=True))
                if _agree(replayed, expected) and _same_state(end, torch_rng(device)):
                    self.graphs[key], self.calls[key] = (graph, names), 1
        if key not in self.graphs:
            self.eager.add(key)
        set_torch_rng(end, device)
        return expected


def _make_graph(fn: Callable, tensors: tuple, start: Any, device: torch.device) -> Callable | None:
    from torch.fx.experimental.proxy_tensor import make_fx

    set_torch_rng(start, device)
    try:
        with torch.no_grad(), pyro.validation_enabled(False):
            graph = fold_constants(make_fx(fn, tracing_mode="real")(*tensors), detaches=True)
    except Exception:  # Python the recorder cannot follow: the chunks run eagerly
        return None
    return torch.no_grad()(graph)  # without its detaches, it is run without gradients


def _agree(a: Outputs, b: Outputs) -> bool:
    return a.keys() == b.keys() and all(same(a[k], b[k]) for k in b)


def _same_state(a: Any, b: Any) -> bool:
    return torch.equal(a[0], b[0]) and (a[1] is None or b[1] is None or torch.equal(a[1], b[1]))
