r"""How the calls of one signature run (:class:`Route`), the routes of one function, bounded
(:class:`Routes`), and the two things a route does: record a call (:func:`record_call`: the call run
eagerly and watched, its graph recorded and admitted, kept under a guard) and find the graph for a
call now (:func:`graph_for`: the guard read, the graph recorded with this very fingerprint).
Shared by the losses (:mod:`.graph`) and prediction's chunks (:mod:`pyro_dropout.prediction.recorded`).
"""

from __future__ import annotations

import time
import warnings
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, cast

import torch

from ...guards import Guard, Root, Snapshot, TooLarge, found_roots, restoring, tensors_of, watching
from .checks import admitted
from .record import live_tensors, mutated_tensors, record_loss, with_its_gradient

__all__ = ["MAX_GRAPHS", "MAX_RERECORDS", "MAX_ROUTES", "Route", "Routes", "graph_for", "record_call"]

MAX_ROUTES = 32  # call signatures kept per function (their counts, guards and graphs)
MAX_GRAPHS = 4  # graphs kept per signature, one per state of what it reads (a value changed and back)
MAX_RERECORDS = 5  # new states recorded whatever their frequency; beyond, only where rarer than 1 call in 10


class Route:
    """How the calls of one signature run: ``eager`` (why they run eagerly; "" while they may be
    recorded), the ``guard`` and its ``graphs`` by fingerprint, and what it cost."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.eager = ""
        self.guard: Guard | None = None
        self.graphs: OrderedDict[Hashable, tuple[Callable, list]] = OrderedDict()
        self.calls = self.replays = self.records = 0
        self.record_s = 0.0
        self.compiled = False

    def describe(self, pending: str) -> str:
        """How the route runs, in words; ``pending``: when one not yet recorded is recorded."""
        if self.eager:
            return f"{self.label}: eager ({self.eager}); {self.calls} calls"
        if self.guard is None:
            return f"{self.label}: eager, {pending}; {self.calls} calls"
        kind = "compiled graph" if self.compiled else "recorded graph"
        return (
            f"{self.label}: {kind}, guarded on every call by {len(self.guard.roots)} roots; "
            f"{self.replays} of {self.calls} calls replayed; recorded {self.records} times "
            f"({1e3 * self.record_s:.0f} ms)"
        )


class Routes:
    """The routes of one function by call signature, at most :data:`MAX_ROUTES` (least recently used
    first out, with one warning from ``owner``), each keeping at most ``max_graphs`` graphs."""

    def __init__(self, owner: str, max_graphs: int = MAX_GRAPHS) -> None:
        self.owner, self.max_graphs = owner, max_graphs
        self.by_key: OrderedDict[Hashable, Route] = OrderedDict()
        self.warned = False

    def get(self, key: Hashable, args: tuple, kwargs: dict) -> Route:
        route = self.by_key.get(key)
        if route is None:
            shapes = [tuple(t.shape) for t in tensors_of(args, kwargs)]
            route = self.by_key[key] = Route(
                "inputs " + ", ".join(map(str, shapes)) if shapes else "no tensors"
            )
            if len(self.by_key) > MAX_ROUTES:
                self.by_key.popitem(last=False)
                self.bound(f"more than {MAX_ROUTES} call signatures (input shapes and other arguments)")
        self.by_key.move_to_end(key)
        route.calls += 1
        return route

    def bound(self, what: str) -> None:
        if not self.warned:
            self.warned = True
            warnings.warn(
                f"{self.owner}: {what}: the least recently used are dropped, and run eagerly until "
                "recorded again (exact; explain() lists the routes)",
                stacklevel=6,
            )

    def compiled_any(self) -> bool:
        return any(r.compiled for r in self.by_key.values())


def graph_for(route: Route) -> Callable | None:
    """The graph recorded for what the route's guard reads now, or None; a route whose state changes
    at most calls turns eager."""
    assert route.guard is not None
    try:
        now = route.guard.now()
    except TooLarge as e:  # what it reads grew since it was recorded
        route.eager, route.guard = f"what the code reads grew too large to compare at every call ({e})", None
        route.graphs.clear()
        return None
    found = route.graphs.get(now)
    if found is not None:
        route.graphs.move_to_end(now)
        route.replays += 1
        return found[0]
    if route.records >= MAX_RERECORDS and route.records * 10 > route.calls:
        route.eager = f"{route.guard.change(next(reversed(route.graphs)), now)} changed at most calls"
        route.graphs.clear()
    return None


def record_call(
    route: Route,
    routes: Routes,
    fn: Callable[..., Any],
    params: tuple[torch.Tensor, ...],
    args: tuple,
    kwargs: dict,
    roots: list[Root],
    compiling: bool = False,
    detaches: bool = False,
) -> Any:
    """``fn(*args, **kwargs)``, run eagerly and watched; its graph (of ``(*params, *tensors of the
    arguments)``) recorded, admitted and kept in ``route`` where a guard can cover what it read, else
    ``route.eager`` says why. ``roots``: the roots every guard reads (the route's own where it has
    one: new reads are added). Where the graph is kept, this call's result is the graph's too, run
    from where the call started (the model's and guide's tensors, the random state): from its
    recording on, a signature's calls are its graph's (a compiled graph rounds otherwise than the
    eager call, and a run resumed elsewhere must compute as the run it continues)."""
    start = time.perf_counter()
    inputs = (*params, *tensors_of(args, kwargs))
    device = inputs[0].device if inputs else torch.device("cpu")
    before, reader = Guard(roots).read(versions=False)
    snapshot = Snapshot(reader.kept, device)
    with watching() as reads:
        value = fn(*args, **kwargs)
    value = with_its_gradient(value, params)  # the recording's passes may change what it saved
    route.records += 1
    known = {name for name, _ in roots}
    guard = Guard([*roots, *(r for r in found_roots(reads) if r[0] not in known)])
    why = reads.refused or _refusal(reads, guard, before)
    if not why:
        why = _keep_graph(route, routes, guard, fn, params, args, kwargs, compiling, detaches)
    if why:
        route.eager, route.guard = why, None
        route.graphs.clear()
    elif snapshot.covers(mutated_tensors(next(reversed(route.graphs.values()))[0])):
        snapshot.restore()
        value = next(reversed(route.graphs.values()))[0](*inputs)
    route.record_s += time.perf_counter() - start
    return value


def _refusal(reads: Any, guard: Guard, before: tuple) -> str:
    """Why no guard can cover what the watched call did ("" where one can)."""
    try:
        now, reader = guard.read(versions=False)
    except TooLarge as e:
        return f"what the code reads is too large to compare at every call ({e})"
    if now[: len(before)] != before:
        return f"the code changes {guard.change(before, now)} while it runs"
    changed = [where for owner, where in reads.mutated if id(owner) in reader.seen]
    return f"the code changes a container it reads ({changed[0]})" if changed else ""


def _keep_graph(
    route: Route,
    routes: Routes,
    guard: Guard,
    fn: Callable[..., Any],
    params: tuple[torch.Tensor, ...],
    args: tuple,
    kwargs: dict,
    compiling: bool,
    detaches: bool,
) -> str:
    """Record, admit and keep the graph of the call; why not, where it cannot be kept."""
    inputs = (*params, *tensors_of(args, kwargs))
    device = inputs[0].device if inputs else torch.device("cpu")
    _, reader = guard.read(versions=False)
    with restoring(reader.kept, device) as changed:
        graph, why = record_loss(fn, args, kwargs, params, compiling, detaches)
        if graph is None and compiling:
            warnings.warn(f"{routes.owner}: {why}; the recorded graph runs without compiling", stacklevel=7)
            graph, why = record_loss(fn, args, kwargs, params, False, detaches)
            compiling = False
        if graph is not None:
            try:
                why = admitted(graph, inputs, len(params), lambda: fn(*args, **kwargs), device)
            except Exception as error:  # the graph, or the call run again, failed: eager is exact
                why = f"the recorded graph could not be checked ({type(error).__name__}: {error})"
    why = f"the code changes {changed[0]} in place" if changed else why
    if why or graph is None:
        return why
    guard.live = frozenset(map(id, (*inputs, *live_tensors(graph))))
    fingerprint, reader = guard.read()
    route.guard, route.compiled = guard, compiling
    route.graphs[fingerprint] = (cast(Callable, graph), reader.kept)
    if len(route.graphs) > routes.max_graphs:
        route.graphs.popitem(last=False)
        if routes.max_graphs > 1:
            routes.bound(f"more than {routes.max_graphs} states of what one signature reads")
    return ""
