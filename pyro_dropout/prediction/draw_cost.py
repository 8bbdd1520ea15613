r"""What one more draw costs in a chunk: the widest tensor that grows with the draws.

The chunk rule (:func:`~.chunks.auto_chunk_size`) sizes a chunk by one draw's widest layer. For a
model that computes part of its pass once for all draws (a converted network folds its draws in
at the first layer whose weights differ, :mod:`pyro_dropout.nn.converted.fold`; a frozen
backbone under ``last_layer=True``), the widest layer of one draw's pass is often shared: it
would shrink the chunks to one draw and repeat the shared part for every draw. Here the guide and
the model run on two and on four draws (after a first pass of two for a model that checks its own
batching on its first batched pass; the random state left as it was); each tensor's growth from the first
pass to the second, per draw, is what that tensor costs a draw, and the widest such growth sizes
the chunk, which may then hold as much as the shared pass's widest tensor.
"""

from __future__ import annotations

from pyro.util import get_rng_state, set_rng_state

from ..ops import tensor_sizes
from .chunks import ChunkRunner

__all__ = ["per_draw_bytes"]


def _sizes(runner: ChunkRunner, size: int) -> list[int]:
    return tensor_sizes(lambda: runner.run(size))[1]


def per_draw_bytes(runner: ChunkRunner, warm_up: bool = True) -> int | None:
    """The widest per-draw growth of a tensor between a chunk of two draws and one of four (with
    ``warm_up``, after a first pass of two, for a model that checks its batched draws on its first
    batched pass); ``None`` where the two passes do not run the same operations, or fail."""
    state = get_rng_state()
    small, large = 2, 4  # (a chunk of one draw runs other operations than larger ones)
    try:
        if warm_up:
            runner.run(2)  # a model's own checks of its batched draws run on the first: not measured
        few, more = (_sizes(runner, n) for n in (small, large))
    except Exception:  # the plain rule then sizes the chunk
        return None
    finally:
        set_rng_state(state)
    if len(few) != len(more):
        return None
    return max([(b - a) // (large - small) for a, b in zip(few, more, strict=True)] + [1])
