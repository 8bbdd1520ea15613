r"""A converted network's draws with its own dropout (``masks="own"``): the network's MC dropout.

Every dropout of the network draws its masks as the network does: a new mask for every element of
every row at every call. A draw's weights are the guide's means (its masks are the network's), so
every draw of a chunk has the same weights, and ``S`` draws on ``N`` points are one pass of the
network's own forward (:mod:`.source`: its classes and code, never converted) on the ``S·N`` rows of
its input repeated (draw-major), exactly as ``S`` passes of the network in MC dropout, in pieces
that fit the CPU's cache. Element and channel dropout draw their masks with the library's fast
Bernoulli draws (:class:`~.dropout_calls.FastDropout`): the same distribution as torch's. Where the
draws' weights differ (samples of another guide, or from MCMC), the draws run one pass each, each
with its own weights.

Before the rows of several draws share a pass, once per input shape and state of the network, the
network is checked to treat the rows of a batch apart: with its dropout off, the rows of a batch of
probes (the first rows, a repeat and, for real-valued inputs, a perturbed copy) must give what they
give in passes of their own. A forward that mixes rows (``h - h.mean(0)``, batch statistics) fails
that, is warned about, and runs one pass per draw: the network's own MC dropout, one pass at a time.
"""

from __future__ import annotations

import contextvars
import math
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch

from ...ops import cache_bytes, largest_tensor_bytes
from ..functional import strip_plate_slots, unexpand
from .dropout_calls import DropoutInputs, FastDropout, NoDropout
from .inputs import Inputs
from .loop import Draw

__all__ = ["CHECK_ROWS", "dropout_off", "evaluating", "network_output", "own_pass", "same_weights"]

CHECK_ROWS = 3  # rows of the probes of a self-check
_OFF: contextvars.ContextVar[bool] = contextvars.ContextVar("pyro_dropout_dropout_off", default=False)


@contextmanager
def dropout_off() -> Iterator[None]:
    """Within the block a converted network runs with its dropout off (``net.eval()``): the pass of
    the expected weights, :func:`~pyro_dropout.prediction.predict_standard`."""
    token = _OFF.set(True)
    try:
        yield
    finally:
        _OFF.reset(token)


@contextmanager
def evaluating(net: torch.nn.Module, off: bool = True) -> Iterator[None]:
    """``net`` in eval mode within the block (``off``), with every dropout call off, even one that
    drops in eval mode (``F.dropout(h, p)``); its modules' modes put back after."""
    if not off:
        yield
        return
    modes = [(m, m.training) for m in net.modules()]
    net.train(False)
    try:
        with NoDropout():
            yield
    finally:
        for module, mode in modes:
            module.training = mode


def network_output(out: Any) -> Any:
    """The tensor a network's output holds: itself, or the ``logits`` of a Hugging Face model
    output (or of a dict)."""
    if isinstance(out, torch.Tensor):
        return out
    logits = out.get("logits") if isinstance(out, dict) else getattr(out, "logits", None)
    return logits if isinstance(logits, torch.Tensor) else out


def same_weights(cache: dict[str, torch.Tensor], sites: dict[str, int]) -> bool:
    """Whether every draw of the sampled sites has the same value (the guide's means, expanded)."""
    for name, core in sites.items():
        value = cache.get(name)
        if value is not None and strip_plate_slots(unexpand(value, core), core).dim() > core:
            return False
    return True


def _probes(x: Inputs) -> list[tuple[Inputs, int]]:
    """Batches whose rows a row-wise network treats apart, each with where its second part starts."""
    rows = x.take(0, CHECK_ROWS)
    probes = [(rows.join(rows.take(0, 1)), rows.rows)]
    if rows.real_valued:  # a perturbed copy: rows that differ, from a generator of its own
        generator = torch.Generator(device=rows.first().device).manual_seed(0)
        probes.append((rows.join(rows.nudged(0.05, generator)), rows.rows))
    return probes


def rows_apart(net: torch.nn.Module, x: Inputs, forward: Callable[[Inputs], Any]) -> str | None:
    """``None`` where ``forward`` (a pass of ``net``, its dropout off) treats the rows of a batch apart
    and every dropout call of it draws a mask per row, else why not."""
    with torch.no_grad(), evaluating(net):
        for batch, k in _probes(x):
            try:
                with DropoutInputs() as whole:
                    together = network_output(forward(batch))
                first, second = batch.take(0, k), batch.take(k, batch.rows)
                with DropoutInputs() as part:
                    apart_first = network_output(forward(first))
                apart = torch.cat([apart_first, network_output(forward(second))])
            except Exception as e:  # the forward cannot take these batches: one pass per draw
                return f"a batch of {batch.rows} rows failed ({type(e).__name__}: {e})"
            shared_mask = whole.unchanged(part)
            if shared_mask:
                return (
                    f"a dropout's input {shared_mask} is the same for {batch.rows} rows as for {k}: its one "
                    "mask serves all the rows of a pass (computed from no per-row input)"
                )
            if not isinstance(together, torch.Tensor) or together.shape != apart.shape:
                return f"a batch of {batch.rows} rows gave outputs shaped unlike its rows' own"
            gap = float((together - apart).abs().max()) if together.numel() else 0.0
            scale = float(apart.abs().max()) if apart.numel() else 0.0
            if not (math.isfinite(gap) and gap <= 1e-4 * max(1.0, scale)):
                return f"its rows' outputs in one batch differ from their own passes by up to {gap:.3g}"
    return None


def _widest_row(net: torch.nn.Module, x: Inputs, forward: Callable[[Inputs], Any]) -> int:
    """The bytes per row of the widest tensor of a pass (its dropout off) on the first rows."""
    rows = x.take(0, CHECK_ROWS)
    with torch.no_grad(), evaluating(net):
        _, widest = largest_tensor_bytes(lambda: forward(rows))
    return -(-widest // rows.rows)


def _joined_by_shared(x: Inputs) -> list[str]:
    """The shared inputs that may join the rows (a graph's ``edge_index``): tensors with a dim."""
    return [n for n, v in x.shared().items() if isinstance(v, torch.Tensor) and v.dim() > 0]


def _decide(
    model: Any, key: tuple, net: torch.nn.Module, x: Inputs, forward: Callable[[Inputs], Any]
) -> tuple[bool, int]:
    """Whether the draws may share one pass for inputs like ``x``, and the widest tensor of a pass
    per row (checked once per input shape and state of the network, ``key``; why not, kept in the
    model's ``row_reasons``)."""
    verdicts, reasons = model.row_verdicts, model.row_reasons
    if key not in verdicts:
        if len(verdicts) >= 32:
            verdicts.clear()
            reasons.clear()
        why = rows_apart(net, x, forward)
        verdicts[key] = (why is None, _widest_row(net, x, forward) if why is None else 0)
        reasons[key] = why
        if why is not None and not _joined_by_shared(x):  # a graph's nodes are joined by its edges
            warnings.warn(
                f"from_module: the network's forward does not treat the rows of a batch apart: {why}. "
                "Its draws run one pass each from now on (the network's own MC dropout, exact, slower)",
                stacklevel=5,
            )
    return verdicts[key]


def _pieces(draws: int, rows: int, widest_row: int, device: torch.device) -> list[int]:
    """The draws of a pass split into pieces whose widest tensor fits the CPU's L2 cache (in
    prediction: memory-bound layers run faster on a batch that stays in cache than on one large
    batch, ``benchmarks/converted_prediction.py``); one piece on a GPU, or with gradients."""
    if device.type != "cpu" or torch.is_grad_enabled() or widest_row <= 0:
        return [draws]
    budget = cache_bytes(2) or 2**21
    per = max(1, min(draws, budget // (widest_row * rows)))
    return [min(per, draws - start) for start in range(0, draws, per)]


def _batch_first(out: Any, rows: int, x: Inputs) -> Any:
    """``out`` (one pass's output, for inputs ``x``) checked to hold ``rows`` rows on dim 0."""
    if isinstance(out, torch.Tensor) and (out.dim() == 0 or out.shape[0] != rows):
        plain = isinstance(x.given, torch.Tensor)
        if plain and x.first().dim() == 1:
            hint = "one point given without its batch dimension? pass x.unsqueeze(0)"
        elif plain:
            hint = "return them batch-first (a time-first network's outputs transposed, in a wrapper module)"
        else:
            hint = (
                f"the rows are taken from the first per-example input ({x.names[x.batched.index(True)]}); "
                "declare the inputs that are the same for every example with shared=[...] (their names), "
                "or return the outputs batch-first"
            )
        given = f"x {tuple(x.first().shape)}" if plain else x.describe()
        raise ValueError(
            f"from_module: the network returned outputs of shape {tuple(out.shape)} for a batch of "
            f"{rows} rows ({given}); the likelihood needs the batch on dim 0 ([N, outputs]): " + hint
        )
    return out


def _reason(model: Any, key: tuple, x: Inputs) -> str:
    """Why the rows of a batch of inputs like ``x`` cannot share a pass, in a few words."""
    joined = _joined_by_shared(x)
    if joined:
        return f"the shared {', '.join(joined)} joins the rows of a batch"
    why = model.row_reasons.get(key) or ""
    if "is the same for" in why:
        return "a dropout's mask serves all the rows of a pass"
    return "its forward mixes the rows of a batch"


def _own_route(count: int, apart: bool, per_draw: bool | None, pieces: int, why: str) -> str:
    if count == 1:
        return "the network's own forward, one draw"
    if per_draw or not apart:
        why = "per_draw=True" if per_draw else why
        return f"the network's own forward, one pass per draw ({why})"
    return (
        f"the network's own forward on the {count} draws' rows together ({pieces} "
        f"piece{'s' if pieces > 1 else ''})"
    )


def own_pass(model: Any, x: Inputs, draws: torch.Size, sites: dict[str, int]) -> Any:
    """The outputs of the draws ``draws`` at ``x`` ``[*draws, N, ...]`` (no draws: ``[N, ...]``), the
    network's own forward drawing its own masks (its dropout off within :func:`dropout_off`)."""
    source, cache, n = model.source, model._pyro_context.cache, x.rows
    with FastDropout(), evaluating(source.source, off=_OFF.get()):
        if not draws:
            weights = source.weights(cache, sites, None)
            return _batch_first(network_output(source(weights, x)), n, x)
        count = math.prod(draws)
        if count > 1 and not same_weights(cache, sites):  # weights of their own: one pass each
            model.note_route(x, "the network's own forward, one pass per draw (each draw's weights its own)")
            passes = (source(source.weights(cache, sites, Draw(i, draws)), x) for i in range(count))
            outs = [_batch_first(network_output(out), n, x) for out in passes]
        else:
            weights = source.weights(cache, sites, Draw(0, draws))  # one set of weights for all

            def forward(rows: Inputs) -> Any:
                return source(weights, rows)

            key = (x.key(), model.state_key())
            apart, widest = (True, 0) if count == 1 else _decide(model, key, source.source, x, forward)
            pieces = (
                [1] * count if model.per_draw or not apart else _pieces(count, n, widest, x.first().device)
            )
            model.note_route(x, _own_route(count, apart, model.per_draw, len(pieces), _reason(model, key, x)))
            outs = [_batch_first(network_output(forward(x.repeat(k))), k * n, x) for k in pieces]
    if not all(isinstance(o, torch.Tensor) for o in outs):
        return outs[0]
    out = outs[0] if len(outs) == 1 else torch.cat(outs)
    return out.reshape(*draws, n, *out.shape[1:])
