r"""The engine of prediction: the chunks of draws, each a vectorised pass of the guide (or the
samples) and the model."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pyro
import torch
from pyro import poutine
from pyro.poutine.trace_struct import Trace

from ..infer.batched_errors import BatchedDrawError
from ..infer.input_checks import check_finite_inputs, check_not_empty
from ..ops import is_positive_int
from .batching import remember_unbatched
from .chunks import ChunkRunner, DrawLatents, auto_chunk_size, largest_tensor_bytes
from .collect import Outputs, chunk_outputs, plate_nesting
from .draws import Predictions
from .observations import check_array_inputs, check_observations
from .recorded import ChunkGraphs

__all__ = ["check_wanted", "device_of", "draw_chunks", "prepare", "wanted_sites"]


def device_of(*modules: Any) -> torch.device | None:
    """The device of the first parameter or buffer of the modules among ``modules``."""
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


def _chunk_setting(chunk_size: Any) -> int | str | None:
    if chunk_size is None or chunk_size == "auto":
        return chunk_size
    if not is_positive_int(chunk_size):
        raise ValueError(f"chunk_size must be a positive int, 'auto' or None, got {chunk_size!r}")
    return chunk_size


MeasureDraws = Callable[[ChunkRunner, bool], int | None]  # (runner, warm_up) -> a draw's bytes, or None
MEASURE_FROM = 20  # draws from which a chunk is sized by what a draw adds (see _auto_chunk)
# draws per chunk of a model that splits its own passes into cache-sized pieces (a converted network
# with its own masks): the chunk bounds the outputs held twice, not the working memory
MAX_SELF_SIZED_CHUNK = 1000


def prepare(
    model: Callable,
    one_draw: Callable[[tuple, dict], dict[str, torch.Tensor]],
    draw_latents: DrawLatents,
    args: tuple,
    kwargs: dict,
    num_samples: int,
    chunk_size: int | str | None,
    device: torch.device | None,
    measure_draws: MeasureDraws | None = None,
) -> tuple[ChunkRunner, int]:
    """The runner of the chunks and the draws per chunk, from one posterior draw's pass of the model
    (``measure_draws``: for a model that shares part of its pass between draws, the chunk is sized
    by what a draw adds, as :func:`~.draw_cost.per_draw_bytes` measures it, or
    :meth:`~.recorded.ChunkGraphs.per_draw_bytes`, once per input shape)."""
    if not is_positive_int(num_samples):
        raise ValueError(f"num_samples must be a positive int, got {num_samples!r}")
    chunk_size = _chunk_setting(chunk_size)
    check_array_inputs(args, kwargs)
    args, kwargs = _to_device(args, kwargs, device)
    check_not_empty(args, kwargs)
    check_finite_inputs(args, kwargs)
    with torch.no_grad(), poutine.block():
        # the structure (plates, shapes) from one posterior draw, not from the prior, whose
        # draws can overflow (e.g. a log-variance head under a broad prior)
        with pyro.validation_enabled(False):
            draw = one_draw(args, kwargs)
            conditioned = poutine.trace(poutine.condition(model, draw))
            if chunk_size == "auto":  # the widest layer of one draw sets the chunk
                prototype, widest = largest_tensor_bytes(lambda: conditioned.get_trace(*args, **kwargs))
            else:
                prototype = conditioned.get_trace(*args, **kwargs)
    check_observations(prototype)
    runner = ChunkRunner(
        model, draw_latents, prototype, plate_nesting(prototype), args, kwargs, frozenset(draw)
    )
    if chunk_size == "auto":
        return runner, _auto_chunk(
            runner, device or _device_of_inputs(runner), widest, num_samples, measure_draws
        )
    return runner, num_samples if chunk_size is None else int(chunk_size)


def _auto_chunk(
    runner: ChunkRunner, device: torch.device, widest: int, num_samples: int, measure: MeasureDraws | None
) -> int:
    """Draws per chunk: from one draw's widest tensor, or, where that gives chunks smaller than the
    draws and ``measure``, from what a draw adds (a pass partly shared by the draws, such as
    LeNet's convolutions under dropout of its last layer, is then run once per chunk, not per draw)."""
    if device.type == "cpu" and getattr(runner.model, "sizes_its_passes", False):
        return min(num_samples, MAX_SELF_SIZED_CHUNK)  # it splits its passes to fit the cache itself
    chunk = auto_chunk_size(device, widest, num_samples)
    checks_itself = getattr(runner.model, "checks_its_batching", False)
    # measuring costs six draws' passes (eight for a model that checks itself): worth it for enough draws
    if measure is None or chunk >= num_samples or (num_samples < MEASURE_FROM and not checks_itself):
        return chunk
    grows = measure(runner, checks_itself)
    return chunk if grows is None else auto_chunk_size(device, grows, num_samples, shared_bytes=widest)


def draw_chunks(
    runner: ChunkRunner,
    num_samples: int,
    chunk: int,
    parallel: bool,
    wanted: set[str] | None,
    meta: Predictions,
    graphs: ChunkGraphs | None = None,
) -> Iterator[tuple[int, Outputs]]:
    """``(size, draws)`` of each chunk, vectorised over its draws (``parallel=False``: one draw at a
    time, no plate of draws, for models that cannot broadcast), each chunk's pass recorded once and
    replayed under its guard where ``graphs`` keeps it (:mod:`.recorded`); where a chunk of batched
    draws fails after the batching check passed, the rest run one at a time, with a warning."""
    done = 0
    while done < num_samples:  # a failed chunk of batched draws runs the rest one at a time
        size = min(chunk, num_samples - done) if parallel else 1
        outputs = None
        if parallel:
            try:
                count = (num_samples - done) // size  # chunks of this size left in the call
                first = done == 0
                outputs = _batched_chunk(runner, size, count, wanted, meta, graphs, first)
            except BatchedDrawError as error:  # the check's two draws passed, these did not
                parallel, size = _one_at_a_time(runner, error, graphs), 1
        if outputs is None:
            trace, latents = runner.run_one()
            check_wanted(wanted, trace)
            outputs = chunk_outputs(meta, trace, latents, wanted, runner.nesting, size, batched=False)
        yield size, outputs
        done += size


def _batched_chunk(
    runner: ChunkRunner,
    size: int,
    count: int,
    wanted: set[str] | None,
    meta: Predictions,
    graphs: ChunkGraphs | None,
    first: bool,
) -> Outputs:
    def run(args: tuple, kwargs: dict, description: Predictions) -> Outputs:
        trace, latents = runner.run(size, args, kwargs)
        check_wanted(wanted, trace)
        return chunk_outputs(description, trace, latents, wanted, runner.nesting, size)

    if graphs is None:
        return run(runner.args, runner.kwargs, meta)
    return graphs.outputs(size, count, runner.args, runner.kwargs, run, meta, first)


def _one_at_a_time(runner: ChunkRunner, error: BatchedDrawError, graphs: ChunkGraphs | None) -> bool:
    """Warn that a chunk of batched draws failed (where the self-check's two draws passed: a plate
    sized from a layer's output, say) and that the draws run one at a time from now on."""
    cause = error.__cause__ or error
    first = str(cause).strip().splitlines()[0] if str(cause).strip() else type(cause).__name__
    warnings.warn(
        f"predict: the model failed on a chunk of draws batched together ({type(cause).__name__}: "
        f"{first}), though its check on two draws passed; its draws run one at a time from now on "
        "(parallel=False): exact, slower",
        stacklevel=4,
    )
    if graphs is not None:
        remember_unbatched(runner, graphs.batching, graphs.state())
    return False


def _device_of_inputs(runner: ChunkRunner) -> torch.device:
    for value in (*runner.args, *runner.kwargs.values()):
        if isinstance(value, torch.Tensor):
            return value.device
    return torch.device("cpu")


def wanted_sites(return_sites: Iterable[str] | None) -> set[str] | None:
    if return_sites is None:
        return None
    if isinstance(return_sites, str) or not all(isinstance(n, str) for n in return_sites):
        raise TypeError(f"return_sites must be a list of site names, got {return_sites!r}")
    return set(return_sites)


def check_wanted(wanted: set[str] | None, trace: Trace) -> None:
    sites = [n for n, site in trace.nodes.items() if site["type"] == "sample"]
    unknown = sorted((wanted or set()) - set(sites))
    if unknown:
        raise ValueError(f"return_sites names sites the model does not have: {unknown} (its sites: {sites})")
