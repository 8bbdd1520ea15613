r"""A chunk of draws recorded once and replayed: prediction on the one fast path (docs/design.md).

An eager chunk costs milliseconds of Pyro's Python whatever its size, so :class:`ChunkGraphs`
records a chunk's pass (the guide's draws, the model, the outputs kept) per chunk size, input shape
and state, and replays it: fresh masks from the eager chunk's generator calls. A graph is kept only
where it gives an eager chunk's outputs and draws; the first chunk of each call runs eagerly beside
it (in a stream of :func:`~.predict_chunks`, every 64th too), and a graph that differs is dropped.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable
from typing import Any

import pyro
import torch

from ..infer.recorded.checks import ValueReads, same, set_torch_rng, side_by_side, torch_rng
from ..infer.recorded.record import record_loss
from ..infer.recorded.state import StateWatch, call_key, tensors_of, with_tensors
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
        return _KEPT.get(guide) or _KEPT.setdefault(guide, ChunkGraphs(StateWatch(model, guide)))
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
        self.graphs: dict[Hashable, list] = {}  # a key's graph, its outputs' names and its calls
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
        tensors = tensors_of(args, kwargs)
        device = tensors[0].device if tensors else torch.device("cpu")
        if key not in self.graphs:
            return self._record(key, args, kwargs, run, meta, device)
        kept = self.graphs[key]
        graph, names, calls = kept[0], kept[1], kept[2] + 1
        kept[2] = calls
        if not first and (not streamed or calls % CHECK_EVERY):
            return dict(zip(names, graph(*tensors), strict=True))
        replayed, expected, same_draws = side_by_side(
            lambda: dict(zip(names, graph(*tensors), strict=True)), lambda: run(args, kwargs, meta), device
        )
        if not (same_draws and _agree(replayed, expected)):
            del self.graphs[key]  # stale (a global or a closure changed): eager from here on
            self.eager.add(key)
        return expected

    def _record(self, key: Hashable, args: tuple, kwargs: dict, run: Run, meta: Any, device: Any) -> Outputs:
        """The eager chunk; and its graph kept where, from the chunk's random state, it gives the
        chunk's outputs and draws, and the chunk reads no tensor's value."""
        tensors, start = tensors_of(args, kwargs), torch_rng(device)
        with ValueReads() as reads, pyro.validation_enabled(False):  # validation reads values
            names = tuple(run(args, kwargs, Predictions()))  # a scratch description of the sites

        def chunk(*tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
            outputs = run(*with_tensors(args, kwargs, tensors), Predictions())
            return tuple(outputs[n] for n in names)

        set_torch_rng(start, device)
        graph = None
        if reads.first is None:
            with torch.no_grad(), pyro.validation_enabled(False):
                graph, _ = record_loss(chunk, tensors, 0, False, detaches=True)  # None: eager chunks
        set_torch_rng(start, device)
        if graph is None:
            self.eager.add(key)
            return run(args, kwargs, meta)
        graph = torch.no_grad()(graph)  # without its detaches, it runs without gradients
        replayed, expected, same_draws = side_by_side(
            lambda: dict(zip(names, graph(*tensors), strict=True)), lambda: run(args, kwargs, meta), device
        )
        if same_draws and _agree(replayed, expected):
            self.graphs[key] = [graph, names, 1]
        else:
            self.eager.add(key)
        return expected  # as the user has Pyro's validation


def _agree(a: Outputs, b: Outputs) -> bool:
    return a.keys() == b.keys() and all(same(a[k], b[k]) for k in b)
