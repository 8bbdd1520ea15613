r"""A chunk of draws recorded and replayed under a guard: prediction on the one fast path
(docs/design.md, "How a call runs").

An eager chunk costs milliseconds of Pyro's Python whatever its size, so :class:`ChunkGraphs` records
a chunk's pass (the guide's draws, the model, the outputs kept) per chunk size and call signature
where a call has :data:`RECORD_FROM` chunks of that size or more, and replays it: fresh masks from
the generator, as the eager chunk draws them. Each chunk reads the route's guard first (the model,
the guide, Pyro's param store, PyTorch's and Pyro's modes, what the model's code read when it was
recorded): a graph replays a chunk only where all of it is as it was recorded, on every chunk. The
recorded path runs without gradients and without Pyro's validation (which reads values).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable
from typing import Any, cast

import pyro
import torch

from ..guards import Guard, object_roots, signature, tensors_of
from ..infer.recorded.routes import Routes, graph_for, record_call
from .chunks import ChunkRunner
from .collect import Outputs
from .draw_cost import per_draw_bytes
from .draws import Predictions

__all__ = ["RECORD_FROM", "ChunkGraphs", "chunk_graphs", "explain_chunks"]

RECORD_FROM = 24  # chunks of one size in a call from which recording pays (it costs about four chunks)
_KEPT: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # guide -> its ChunkGraphs


def chunk_graphs(guide: Any, model: Any) -> ChunkGraphs | None:
    """The recorded chunks kept with ``guide`` (None for a guide that cannot hold them)."""
    try:
        kept = _KEPT.get(guide)
        if kept is None or kept.model() is not model:
            kept = _KEPT[guide] = ChunkGraphs(model, guide)
        return kept
    except TypeError:  # not weakly referable
        return None


def explain_chunks(model: Any, guide: Any) -> str:
    """How ``predict``'s chunks of ``guide``'s draws on ``model`` run: recorded, replayed under their
    guards, or eager, and why."""
    kept = _KEPT.get(guide) if _weakly_referable(guide) else None
    return kept.explain() if kept is not None and kept.model() is model else "predict's chunks: none yet"


def _weakly_referable(value: Any) -> bool:
    try:
        weakref.ref(value)
        return True
    except TypeError:
        return False


Run = Callable[[tuple, dict, Any], Outputs]  # one eager chunk on (args, kwargs), filling a Predictions


class ChunkGraphs:
    """The routes of one guide's chunks (with ``model``), by chunk size and call signature; what
    each route's chunks describe (the sites' kinds and distributions); ``widths``: what a draw adds
    to a chunk (:func:`~.draw_cost.per_draw_bytes`), by call signature."""

    def __init__(self, model: Any, guide: Any) -> None:
        self.model, self.guide = _ref(model), _ref(guide)
        self.routes = Routes("predict", max_graphs=1)  # a new state (trained weights) replaces the graph
        self.batching: dict[Hashable, bool] = {}  # the batching check's verdicts, by signature and state
        self._state = Guard([("the model", self.model), ("the guide", self.guide)])
        self.descriptions: dict[Hashable, tuple[dict, dict]] = {}
        self.widths: dict[Hashable, int | None] = {}

    def explain(self) -> str:
        pending = f"recorded in a call of {RECORD_FROM} or more chunks of this size"
        routes = [
            f"  chunks of {cast(tuple, k)[0]} draws, {r.describe(pending)}"
            for k, r in self.routes.by_key.items()
        ]
        return "\n".join(["predict's chunks:", *(routes or ["  none recorded"])])

    def state(self) -> Hashable:
        """The model's and guide's fingerprint now: a verdict of the batching check holds for it."""
        return self._state.now()

    def per_draw_bytes(self, runner: ChunkRunner, warm_up: bool) -> int | None:
        """:func:`~.draw_cost.per_draw_bytes`, measured once per call signature."""
        key = signature(runner.args, runner.kwargs)
        if key not in self.widths:
            if len(self.widths) >= 32:
                self.widths.clear()
            self.widths[key] = per_draw_bytes(runner, warm_up)
        return self.widths[key]

    def outputs(
        self, size: int, count: int, args: tuple, kwargs: dict, run: Run, meta: Any, first: bool
    ) -> Outputs:
        """One chunk's outputs: from its graph where the route has one for what its guard reads now,
        else from ``run`` (which records one where the call has at least :data:`RECORD_FROM` chunks
        of this ``size``: ``count``); ``first``: the call's first chunk, which describes the sites in
        ``meta``."""
        with torch.no_grad(), pyro.validation_enabled(False):
            key = (size, signature(args, kwargs))
            route = self.routes.get(key, args, kwargs)
            if route.eager or (route.guard is None and count < RECORD_FROM):
                return run(args, kwargs, meta)
            graph = None if route.guard is None else graph_for(route)
            described = self.descriptions.get(key)
            if graph is not None and described is not None:
                outputs, observed = graph(*tensors_of(args, kwargs))
                if first:
                    meta.kinds.update(described[0])
                    meta.distributions.update(described[1])
                    meta.observed.update(observed)
                return dict(outputs)
            if route.eager:
                return run(args, kwargs, meta)
            roots = (
                object_roots(self.model(), self.guide(), weak=True)
                if route.guard is None
                else route.guard.roots
            )
            fn = _chunk(run, meta)
            outputs, _ = record_call(route, self.routes, fn, (), args, kwargs, roots, detaches=True)
            self.descriptions[key] = (dict(meta.kinds), dict(meta.distributions))
            return dict(outputs)


def _chunk(run: Run, meta: Any) -> Callable[..., tuple[Outputs, dict]]:
    """A chunk as a function of the call's arguments: its outputs and its observed values."""

    def chunk(*args: Any, **kwargs: Any) -> tuple[Outputs, dict]:
        description = Predictions()
        outputs = run(args, kwargs, description)
        meta.kinds.update(description.kinds)
        meta.distributions.update(description.distributions)
        meta.observed.update(description.observed)
        return outputs, dict(description.observed)

    return chunk


def _ref(value: Any) -> Callable[[], Any]:
    try:
        return weakref.ref(value)
    except TypeError:
        return lambda: value
