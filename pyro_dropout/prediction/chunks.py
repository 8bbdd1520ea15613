r"""The chunks of draws of a posterior predictive: their sizes, and one chunk's pass of the guide
(or samples) and the model, vectorised over its draws."""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass

import pyro
import torch
from pyro import poutine
from pyro.poutine.trace_struct import Trace
from pyro.poutine.util import prune_subsample_sites

from ..infer.batched_errors import explain_batched_failure
from ..ops import cache_bytes, largest_tensor_bytes
from .collect import DRAWS_PLATE

__all__ = ["ChunkRunner", "DrawLatents", "auto_chunk_size", "chunk_sizes", "largest_tensor_bytes"]

DrawLatents = Callable[[int, int, Trace, tuple, dict], Trace]  # (size, nesting, prototype, args, kwargs)
MAX_AUTO_CHUNK = 100  # at most this many draws per chunk on a CPU, where the cache sets it
ACCELERATOR_FREE_SHARE = 8  # on a CUDA device: a chunk's widest layer within an eighth of its free memory
ACCELERATOR_CHUNK_BYTES = 2**30  # on another accelerator, whose free memory is not asked: within 1 GiB
# the last-level cache a chunk is sized for, at most: a virtual machine reports its host's whole L3
# (300 MiB on this project's reference machine on 2026-12-02, 32 MiB on 2026-11-29), of which one
# core's share is a few MiB; a quarter of this cap (8 MiB) is the chunk measured best in 2026-11
LLC_CAP_BYTES = 32 * 2**20


@dataclass
class ChunkRunner:
    """One chunk of draws: the latents from ``draw_latents``, replayed into ``model``."""

    model: Callable
    draw_latents: DrawLatents
    prototype: Trace
    nesting: int
    args: tuple
    kwargs: dict
    latents: frozenset = frozenset()  # the sites the prototype's posterior draw set

    def run(self, size: int, args: tuple | None = None, kwargs: dict | None = None) -> tuple[Trace, Trace]:
        """``(trace, latents)`` of ``size`` draws vectorised in a plate (``args``: other tensors of
        the same shapes, for tracing)."""
        a, k = (self.args if args is None else args), (self.kwargs if kwargs is None else kwargs)
        with torch.no_grad(), poutine.block(), pyro.plate(DRAWS_PLATE, size, dim=-(self.nesting + 1)):
            latents = self.draw_latents(size, self.nesting, self.prototype, a, k)
            with explain_batched_failure("predict", "parallel=False"):
                trace = poutine.trace(poutine.replay(self.model, trace=latents)).get_trace(*a, **k)
        return prune_subsample_sites(trace), latents

    def run_one(self) -> tuple[Trace, Trace]:
        """One draw, unbatched (no plate of draws): for models that cannot broadcast."""
        with torch.no_grad(), poutine.block():
            latents = self.draw_latents(1, self.nesting, self.prototype, self.args, self.kwargs)
            trace = poutine.trace(poutine.replay(self.model, trace=latents)).get_trace(
                *self.args, **self.kwargs
            )
        return prune_subsample_sites(trace), latents


def chunk_sizes(total: int, size: int) -> list[int]:
    """``total`` draws in chunks of ``size``, the last one smaller."""
    return [min(size, total - start) for start in range(0, total, size)]


def told_cache_bytes() -> float | None:
    """``PYRO_DROPOUT_CACHE_MB`` in bytes, where set; a value that is not a positive number is an
    error naming the variable."""
    told = os.environ.get("PYRO_DROPOUT_CACHE_MB", "").strip()
    if not told:
        return None
    try:
        value = float(told)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"PYRO_DROPOUT_CACHE_MB must be a positive number of megabytes, got {told!r}")
    return value * 2**20


def _accelerator_budget(device: torch.device) -> int:
    """Bytes a chunk's widest layer may take on ``device``: an eighth of its free memory (CUDA),
    else ``ACCELERATOR_CHUNK_BYTES``. No fixed cap on CUDA: on an H200, T = 1,000 draws on
    N = 10,000 points of the UCI net took 20 ms in the two chunks a 1 GiB cap made and 10 ms in
    one, whose working memory was 1.9 GB (docs/performance.md, "The GPU, measured")."""
    if device.type == "cuda" and torch.cuda.is_available():
        free, _ = torch.cuda.mem_get_info(device)
        return int(free // ACCELERATOR_FREE_SHARE)
    return ACCELERATOR_CHUNK_BYTES


def auto_chunk_size(
    device: torch.device | None, per_draw_bytes: int, num_samples: int, shared_bytes: int = 0
) -> int:
    """Draws per chunk. On a CPU, as many as keep a chunk's widest layer within a quarter of the
    last-level cache, at most a quarter of :data:`LLC_CAP_BYTES` (``PYRO_DROPOUT_CACHE_MB`` overrides
    the cache's size and the cap), so each layer's output
    is still in cache when the next reads it, at most ``MAX_AUTO_CHUNK``; where the draws share
    part of the pass, whose widest tensor takes ``shared_bytes``, the chunk's own tensors may take
    as much as that (the memory the pass needs anyway), so the shared part runs once for many
    draws. On a GPU, where each chunk costs launches whatever its size, as many as keep it within
    a memory budget (:func:`_accelerator_budget`): few, large chunks, of even sizes (1,000 draws
    that fit 512 to a chunk run as two of 500, not 512 and 488)."""
    if device is not None and device.type != "cpu":
        fit = max(1, min(int(_accelerator_budget(device) // max(per_draw_bytes, 1)), num_samples))
        return -(-num_samples // -(-num_samples // fit))  # the fewest chunks, evened out
    cache = told_cache_bytes() or min(cache_bytes() or 8 * 2**20, LLC_CAP_BYTES)
    fit = int(max(cache / 4, shared_bytes) // max(per_draw_bytes, 1))
    return max(1, min(fit, MAX_AUTO_CHUNK, num_samples))
