r"""Posterior predictive draws in vectorised chunks: MC dropout prediction at scale."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, cast

import pyro
import torch
from pyro import poutine
from pyro.poutine.trace_struct import Trace
from pyro.poutine.util import prune_subsample_sites

from .batched import explain_batched_failure
from .collect import DRAWS_PLATE, Buffers, fill, plate_nesting
from .inputs import check_finite_inputs, check_not_empty
from .predictions import Predictions
from .traces import Site

__all__ = [
    "Predictions",
    "predict",
    "predict_chunks",
    "predict_from_samples",
    "predict_standard",
]  # Predictions: re-exported


# --- helpers -------------------------------------------------------------------------------
def _device_of(*modules: Any) -> torch.device | None:
    for module in modules:
        if isinstance(module, torch.nn.Module):
            for tensor in (*module.parameters(), *module.buffers()):
                return tensor.device
    return None


def _to_device(args: tuple, kwargs: dict, device: torch.device | None) -> tuple[tuple, dict]:
    if device is None:
        return args, kwargs
    move = lambda v: v.to(device) if isinstance(v, torch.Tensor) else v  # noqa: E731
    return tuple(move(a) for a in args), {k: move(v) for k, v in kwargs.items()}


def _chunks(total: int, size: int) -> Iterable[int]:
    while total > 0:
        yield min(size, total)
        total -= size


# --- the engine ----------------------------------------------------------------------------
def _chunk_traces(
    model: Callable,
    one_draw: Callable[[tuple, dict], dict[str, torch.Tensor]],
    draw_latents: Callable[[int, int, Trace, tuple, dict], Trace],
    args: tuple,
    kwargs: dict,
    num_samples: int,
    chunk_size: int | None,
    device: torch.device | None,
    parallel: bool = True,
) -> Iterator[tuple[int, int, Trace, Trace]]:
    """``(size, nesting, trace, latents)`` of each chunk of draws, vectorised over the draws
    (``parallel=False``: one draw at a time, no plate of draws, for models that cannot broadcast)."""
    if isinstance(num_samples, bool) or not (isinstance(num_samples, int) and num_samples >= 1):
        raise ValueError(f"num_samples must be a positive int, got {num_samples!r}")
    chunk = num_samples if chunk_size is None else chunk_size
    if isinstance(chunk, bool) or not (isinstance(chunk, int) and chunk >= 1):
        raise ValueError(f"chunk_size must be a positive int, got {chunk_size!r}")
    args, kwargs = _to_device(args, kwargs, device)
    check_not_empty(args, kwargs)
    check_finite_inputs(args, kwargs)
    with torch.no_grad(), poutine.block():
        # the structure (plates, shapes) from one posterior draw, not from the prior, whose
        # draws can overflow (e.g. a log-variance head under a broad prior)
        with pyro.validation_enabled(False):
            prototype = poutine.trace(poutine.condition(model, one_draw(args, kwargs))).get_trace(
                *args, **kwargs
            )
    nesting = plate_nesting(prototype)
    if not parallel:
        for _ in range(num_samples):
            with torch.no_grad(), poutine.block():
                latents = draw_latents(1, nesting, prototype, args, kwargs)
                trace = poutine.trace(poutine.replay(model, trace=latents)).get_trace(*args, **kwargs)
            yield 1, nesting, prune_subsample_sites(trace), latents
        return
    for size in _chunks(num_samples, chunk):
        with torch.no_grad(), poutine.block(), pyro.plate(DRAWS_PLATE, size, dim=-(nesting + 1)):
            latents = draw_latents(size, nesting, prototype, args, kwargs)
            with explain_batched_failure("predict", "parallel=False"):
                trace = poutine.trace(poutine.replay(model, trace=latents)).get_trace(*args, **kwargs)
        yield size, nesting, prune_subsample_sites(trace), latents


def _wanted(return_sites: Iterable[str] | None) -> set[str] | None:
    if return_sites is None:
        return None
    if isinstance(return_sites, str) or not all(isinstance(n, str) for n in return_sites):
        raise TypeError(f"return_sites must be a list of site names, got {return_sites!r}")
    return set(return_sites)


def _check_wanted(wanted: set[str] | None, trace: Trace) -> None:
    sites = [n for n, site in trace.nodes.items() if site["type"] == "sample"]
    unknown = sorted((wanted or set()) - set(sites))
    if unknown:
        raise ValueError(f"return_sites names sites the model does not have: {unknown} (its sites: {sites})")


def _predict(
    traces: Iterator[tuple[int, int, Trace, Trace]], num_samples: int, return_sites: Iterable[str] | None
) -> Predictions:
    wanted = _wanted(return_sites)
    out = Predictions()
    buffers = Buffers(num_samples)
    for size, nesting, trace, latents in traces:
        _check_wanted(wanted, trace)
        fill(out, buffers, trace, latents, wanted, nesting, size)
    for (group, name), tensor in buffers.tensors.items():
        getattr(out, group)[name] = tensor
    return out


def _chunked(
    traces: Iterator[tuple[int, int, Trace, Trace]], return_sites: Iterable[str] | None
) -> Iterator[Predictions]:
    wanted = _wanted(return_sites)
    for size, nesting, trace, latents in traces:
        _check_wanted(wanted, trace)
        out, buffers = Predictions(), Buffers(size)
        fill(out, buffers, trace, latents, wanted, nesting, size)
        for (group, name), tensor in buffers.tensors.items():
            getattr(out, group)[name] = tensor
        yield out


# --- public entry points -------------------------------------------------------------------
def predict(
    model: Callable,
    guide: Callable,
    *args: Any,
    num_samples: int = 1000,
    chunk_size: int | None = 100,
    return_sites: Iterable[str] | None = None,
    parallel: bool = True,
    **kwargs: Any,
) -> Predictions:
    r"""MC-dropout prediction: ``num_samples`` draws of the weights, vectorised in chunks.

    Each chunk of ``chunk_size`` draws runs the guide and the model once, vectorised over
    the draws (one mask per draw, shared by all inputs: paper [1], §4), so peak working
    memory is set by ``chunk_size``, not by ``num_samples``. Tensors are moved to the
    device of the model's (or guide's) parameters. Pass observations as the model's
    usual argument to get :math:`\log p(y_n \mid x_n, \omega_t)` as well.

    Usage::

        pred = predict(model, guide, x_test, y_test, num_samples=1000)
        pred["mean"].shape             # [1000, N]: function draws
        pred.log_likelihood["obs"]     # [1000, N]

    :param return_sites: names of the sites whose draws to keep (default: all).
    :param parallel: ``False`` runs the guide and the model once per draw, unbatched (as
        ``Predictive(parallel=False)``), for a model that cannot take batched weights.
    :returns: :class:`Predictions`.

    References

    [1] Y. Gal, Z. Ghahramani. *Dropout as a Bayesian Approximation.* ICML 2016.
    """

    traces = _guide_traces(model, guide, args, kwargs, num_samples, chunk_size, parallel)
    return _predict(traces, num_samples, return_sites)


def predict_chunks(
    model: Callable,
    guide: Callable,
    *args: Any,
    num_samples: int = 1000,
    chunk_size: int | None = 100,
    return_sites: Iterable[str] | None = None,
    parallel: bool = True,
    **kwargs: Any,
) -> Iterator[Predictions]:
    """:func:`predict`'s draws one chunk at a time, as :class:`Predictions` of ``chunk_size``
    draws each (the same draws ``predict`` makes from the same random state): for scores
    accumulated as the draws are made, in memory bounded by one chunk."""
    traces = _guide_traces(model, guide, args, kwargs, num_samples, chunk_size, parallel)
    return _chunked(traces, return_sites)


def _guide_traces(
    model: Callable,
    guide: Callable,
    args: tuple,
    kwargs: dict,
    num_samples: int,
    chunk_size: int | None,
    parallel: bool,
) -> Iterator[tuple[int, int, Trace, Trace]]:
    """The chunks of draws of ``guide`` (what :func:`predict` and :func:`predict_chunks` share)."""
    draw, one_draw = _guide_draws(guide)
    device = _device_of(model, guide)
    return _chunk_traces(model, one_draw, draw, args, kwargs, num_samples, chunk_size, device, parallel)


def _guide_draws(guide: Callable) -> tuple[Callable, Callable]:
    def draw(size: int, nesting: int, prototype: Trace, a: tuple, k: dict) -> Trace:
        return poutine.trace(guide).get_trace(*a, **k)

    def one_draw(a: tuple, k: dict) -> dict[str, torch.Tensor]:
        trace = poutine.trace(guide).get_trace(*a, **k)
        return {name: cast(torch.Tensor, site["value"]) for name, site in trace.iter_stochastic_nodes()}

    return draw, one_draw


def predict_from_samples(
    model: Callable,
    samples: dict[str, torch.Tensor],
    *args: Any,
    chunk_size: int | None = 100,
    return_sites: Iterable[str] | None = None,
    **kwargs: Any,
) -> Predictions:
    """Like :func:`predict`, for posterior samples ``{site: [T, *site shape]}`` (e.g. from MCMC)."""
    if not samples:
        raise ValueError("predict_from_samples: no samples given")
    num_samples = int(next(iter(samples.values())).shape[0])
    bad = {k: tuple(v.shape) for k, v in samples.items() if v.shape[0] != num_samples}
    if bad:
        raise ValueError(f"predict_from_samples: all samples need {num_samples} draws; got {bad}")
    device = _device_of(model)
    offset = [0]

    def draw(size: int, nesting: int, prototype: Trace, a: tuple, k: dict) -> Trace:
        start = offset[0]
        offset[0] += size
        trace = Trace()
        for name, value in samples.items():
            if name not in prototype.nodes:
                raise ValueError(f"predict_from_samples: site '{name}' is not in the model")
            node: Site = prototype.nodes[name]
            batch = len(node["fn"].batch_shape)
            value = value[start : start + size].to(device) if device else value[start : start + size]
            value = value.reshape((size,) + (1,) * (nesting - batch) + value.shape[1:])
            trace.add_node(name, type="sample", value=value, is_observed=False, fn=None, infer={})
        return trace

    def one_draw(a: tuple, k: dict) -> dict[str, torch.Tensor]:
        return {name: value[0].to(device) if device else value[0] for name, value in samples.items()}

    traces = _chunk_traces(model, one_draw, draw, args, kwargs, num_samples, chunk_size, device)
    return _predict(traces, num_samples, return_sites)


def predict_standard(model: Callable, guide: Any, *args: Any, **kwargs: Any) -> Predictions:
    r""" "Standard dropout": one pass with the expected weights :math:`\mathbb{E}_q[W] = M`.

    The weight-averaging approximation to the MC-dropout predictive mean (paper [1], §4),
    computed from ``guide.median()``. Shapes are those of :func:`predict` with ``T = 1``.
    """
    medians = guide.median()
    samples = {k: v.unsqueeze(0) for k, v in medians.items()}
    return predict_from_samples(model, samples, *args, chunk_size=None, **kwargs)
