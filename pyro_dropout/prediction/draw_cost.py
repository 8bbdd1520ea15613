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

from typing import Any

import torch
from pyro.util import get_rng_state, set_rng_state
from torch.overrides import TorchFunctionMode

from .chunks import ChunkRunner

__all__ = ["per_draw_bytes"]


class _Sizes(TorchFunctionMode):
    """The bytes of every tensor a pass returns, in order (broadcast views not counted)."""

    def __init__(self) -> None:
        super().__init__()
        self.sizes: list[int] = []

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        result = func(*args, **(kwargs or {}))
        for value in result if isinstance(result, tuple | list) else (result,):
            if isinstance(value, torch.Tensor) and 0 not in value.stride():
                self.sizes.append(value.numel() * value.element_size())
        return result


def _sizes(runner: ChunkRunner, size: int) -> list[int]:
    with _Sizes() as mode:
        runner.run(size)
    return mode.sizes


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
