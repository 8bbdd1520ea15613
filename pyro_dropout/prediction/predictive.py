r"""Posterior predictive draws in vectorised chunks: MC dropout prediction at scale."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, cast

import torch
from pyro import poutine
from pyro.poutine.runtime import get_plates
from pyro.poutine.trace_struct import Trace
from pyro.poutine.util import site_is_subsample

from ..guides import DropoutGuide
from ..infer.loss_terms import UNSEEN_SITE, Site
from ..nn import dropout_off
from .batching import batched_is_exact
from .collect import DRAWS_PLATE, Buffers, Outputs
from .draw_cost import per_draw_bytes
from .draws import Predictions
from .engine import device_of, draw_chunks, prepare, wanted_sites
from .recorded import chunk_graphs

__all__ = [
    "Predictions",
    "predict",
    "predict_chunks",
    "predict_from_samples",
    "predict_standard",
]  # Predictions: re-exported


def _predict(chunks: Iterator[tuple[int, Outputs]], out: Predictions, num_samples: int) -> Predictions:
    buffers = Buffers(num_samples)
    for size, outputs in chunks:
        buffers.put(outputs, size)
    for (group, name), tensor in buffers.tensors.items():
        getattr(out, group)[name] = tensor
    return out


def _chunked(chunks: Iterator[tuple[int, Outputs]], meta: Predictions) -> Iterator[Predictions]:
    for _, outputs in chunks:
        out = Predictions(
            observed=dict(meta.observed), distributions=dict(meta.distributions), kinds=dict(meta.kinds)
        )
        for (group, name), tensor in outputs.items():
            getattr(out, group)[name] = tensor
        yield out


# --- public entry points -------------------------------------------------------------------
def predict(
    model: Callable,
    guide: Callable,
    *args: Any,
    num_samples: int = 1000,
    chunk_size: int | str | None = "auto",
    return_sites: Iterable[str] | None = None,
    parallel: bool = True,
    **kwargs: Any,
) -> Predictions:
    r"""MC-dropout prediction: ``num_samples`` draws of the weights, vectorised in chunks.

    Each chunk of ``chunk_size`` draws runs the guide and the model once, vectorised over
    the draws (one mask per draw, shared by all inputs: paper [1], §4), so peak working
    memory is set by ``chunk_size``, not by ``num_samples``. The default, ``"auto"``, sizes
    the chunks on a CPU so that one chunk's widest layer fits in a quarter of the last-level
    cache (measured on one draw's pass), at most 100 draws; on a GPU, within a memory budget
    (1 GiB, or an eighth of the free memory where that is less): few, large chunks. Tensors are moved to the
    device of the model's (or guide's) parameters. Pass observations as the model's
    usual argument to get :math:`\log p(y_n \mid x_n, \omega_t)` as well.

    Usage:

        pred = predict(model, guide, x_test, y_test, num_samples=1000)
        pred["mean"].shape             # [1000, N]: function draws
        pred.log_likelihood["obs"]     # [1000, N]

    :param chunk_size: draws per chunk: a positive int, ``"auto"``, or None (all at once).
    :param return_sites: names of the sites whose draws to keep (default: all).
    :param parallel: ``False`` runs the guide and the model once per draw, unbatched (as
        ``Predictive(parallel=False)``), for a model that cannot take batched weights.
    :returns: :class:`Predictions`.

    References

    [1] Y. Gal, Z. Ghahramani. *Dropout as a Bayesian Approximation.* ICML 2016.
    """
    out = Predictions()
    chunks = _guide_chunks(model, guide, args, kwargs, num_samples, chunk_size, parallel, return_sites, out)
    return _predict(chunks, out, num_samples)


def predict_chunks(
    model: Callable,
    guide: Callable,
    *args: Any,
    num_samples: int = 1000,
    chunk_size: int | str | None = "auto",
    return_sites: Iterable[str] | None = None,
    parallel: bool = True,
    **kwargs: Any,
) -> Iterator[Predictions]:
    """:func:`predict`'s draws one chunk at a time, as :class:`Predictions` of ``chunk_size``
    draws each (the same draws ``predict`` makes from the same random state): for scores
    accumulated as the draws are made, in memory bounded by one chunk."""
    meta = Predictions()
    chunks = _guide_chunks(model, guide, args, kwargs, num_samples, chunk_size, parallel, return_sites, meta)
    return _chunked(chunks, meta)


def _guide_chunks(
    model: Callable,
    guide: Callable,
    args: tuple,
    kwargs: dict,
    num_samples: int,
    chunk_size: int | str | None,
    parallel: bool,
    return_sites: Iterable[str] | None,
    meta: Predictions,
) -> Iterator[tuple[int, Outputs]]:
    """The chunks of draws of ``guide`` (what :func:`predict` and :func:`predict_chunks` share)."""
    wanted = wanted_sites(return_sites)
    draw, one_draw = _guide_draws(guide)
    device = device_of(model, guide)
    kept = chunk_graphs(guide, model) if parallel else None
    # what a draw adds to a chunk, measured once per input shape where the guide keeps graphs
    measure = None if not parallel else per_draw_bytes if kept is None else kept.per_draw_bytes
    runner, chunk = prepare(model, one_draw, draw, args, kwargs, num_samples, chunk_size, device, measure)
    _check_seen(guide, runner.prototype)
    verdicts, state = ({}, None) if kept is None else (kept.batching, kept.state())
    parallel = parallel and batched_is_exact(runner, verdicts, state)
    graphs = kept if parallel else None
    return draw_chunks(runner, num_samples, chunk, parallel, wanted, meta, graphs)


def _check_seen(guide: Any, prototype: Trace) -> None:
    """Refuse a latent site that a :class:`DropoutGuide` never saw: the model would draw it from
    its prior, a plausible prediction with a part of the network untrained."""
    if not isinstance(guide, DropoutGuide) or guide.prototype_trace is None:
        return
    seen = guide.prototype_trace.nodes
    unseen = [
        name
        for name, site in prototype.iter_stochastic_nodes()
        if name not in seen and name not in guide.observed_sites and not site_is_subsample(site)
    ]
    if unseen:
        raise ValueError(
            f"predict: the model's latent site '{unseen[0]}' is not sampled by the guide, so it would "
            f"be drawn from its prior. {UNSEEN_SITE}"
        )


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
    chunk_size: int | str | None = "auto",
    return_sites: Iterable[str] | None = None,
    parallel: bool = True,
    **kwargs: Any,
) -> Predictions:
    """Like :func:`predict`, for posterior samples ``{site: [T, *site shape]}`` (e.g. from MCMC);
    ``parallel=False``: one unbatched pass per sample."""
    return _from_samples(model, samples, args, kwargs, chunk_size, return_sites, parallel)


def _draws_of(samples: dict[str, torch.Tensor]) -> int:
    """The number of draws every sample holds (its leading dim), checked to be one."""
    if not samples:
        raise ValueError("predict_from_samples: no samples given")
    num_samples = int(next(iter(samples.values())).shape[0])
    bad = {k: tuple(v.shape) for k, v in samples.items() if v.shape[0] != num_samples}
    if bad:
        raise ValueError(f"predict_from_samples: all samples need {num_samples} draws; got {bad}")
    return num_samples


def _from_samples(
    model: Callable,
    samples: dict[str, torch.Tensor],
    args: tuple,
    kwargs: dict,
    chunk_size: int | str | None,
    return_sites: Iterable[str] | None,
    parallel: bool,
    guide: Any = None,
) -> Predictions:
    """:func:`predict_from_samples`; ``guide``: the samples are its (its unseen sites refused)."""
    num_samples = _draws_of(samples)
    device = device_of(model)
    offset = [0]

    def draw(size: int, nesting: int, prototype: Trace, a: tuple, k: dict) -> Trace:
        start = offset[0]
        offset[0] += size
        batched = any(f.name == DRAWS_PLATE for f in get_plates())
        trace = Trace()
        for name, value in samples.items():
            if name not in prototype.nodes:
                raise ValueError(f"predict_from_samples: site '{name}' is not in the model")
            node: Site = prototype.nodes[name]
            batch = len(node["fn"].batch_shape)
            value = value[start : start + size].to(device) if device else value[start : start + size]
            if batched:
                value = value.reshape((size,) + (1,) * (nesting - batch) + value.shape[1:])
            else:  # one draw at a time (parallel=False): the draw unbatched
                value = value[0]
            trace.add_node(name, type="sample", value=value, is_observed=False, fn=None, infer={})
        return trace

    def one_draw(a: tuple, k: dict) -> dict[str, torch.Tensor]:
        return {name: value[0].to(device) if device else value[0] for name, value in samples.items()}

    wanted, out = wanted_sites(return_sites), Predictions()
    # a site whose samples are one value expanded over the draws (a point weight) is computed once
    # for a chunk of draws: its chunks are sized by what a draw adds (the probe's draws not kept)
    shared = any(v.dim() and v.shape[0] > 1 and v.stride(0) == 0 for v in samples.values())
    measure = per_draw_bytes if shared else None
    runner, chunk = prepare(model, one_draw, draw, args, kwargs, num_samples, chunk_size, device, measure)
    offset[0] = 0
    _check_seen(guide, runner.prototype)
    parallel = parallel and batched_is_exact(runner, {})  # samples, not a guide: checked each call
    # no trace: each chunk takes its own slice of the samples (Python state a trace would freeze)
    chunks = draw_chunks(runner, num_samples, chunk, parallel, wanted, out)
    return _predict(chunks, out, num_samples)


def predict_standard(
    model: Callable, guide: Any, *args: Any, parallel: bool = True, **kwargs: Any
) -> Predictions:
    r""" "Standard dropout": one pass with the expected weights :math:`\mathbb{E}_q[W] = M`.

    The weight-averaging approximation to the MC-dropout predictive mean (paper [1], §4),
    computed from ``guide.median()``, with a converted network's own dropout off. Shapes are
    those of :func:`predict` with ``T = 1``; ``parallel=False`` runs the model unbatched (as
    :func:`predict`'s).
    """
    medians = guide.median()
    samples = {k: v.unsqueeze(0) for k, v in medians.items()}
    with dropout_off():  # a converted network's own dropout off too: net.eval()(x)
        if not samples:  # a guide of no site (a network's own dropout only): its one pass
            return predict(model, guide, *args, num_samples=1, parallel=parallel, **kwargs)
        return _from_samples(model, samples, args, kwargs, None, None, parallel, guide)
