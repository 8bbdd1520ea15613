r"""The draws one at a time: the last resort of a converted network whose forward does not treat
the rows of a batch separately (:mod:`pyro_dropout.nn.converted.fold` cannot fold its draws).

Every weight is sampled for all ``S`` draws first; then, for each draw, the module cache of the
running ``PyroModule`` holds that draw's weights alone, so the user's forward runs on its own
batch with unbatched weights, exactly as written, and the outputs are stacked.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from ..functional import strip_plate_slots

__all__ = ["Draw", "batch_rows", "current_draw", "current_rows", "one_draw", "select_draw"]


@dataclass(frozen=True)
class Draw:
    """The draw being run (flat index into the draw dims ``D``)."""

    index: int
    draws: torch.Size


_DRAW: contextvars.ContextVar[Draw | None] = contextvars.ContextVar("pyro_dropout_draw", default=None)


def current_draw() -> Draw | None:
    return _DRAW.get()


_ROWS: contextvars.ContextVar[int | None] = contextvars.ContextVar("pyro_dropout_rows", default=None)


def batch_rows() -> int | None:
    """The rows ``N`` of the batch the running converted model was given."""
    return _ROWS.get()


@contextmanager
def current_rows(rows: int) -> Iterator[None]:
    token = _ROWS.set(rows)
    try:
        yield
    finally:
        _ROWS.reset(token)


def select_draw(value: torch.Tensor, core: int, draw: Draw | None) -> torch.Tensor:
    """Draw ``draw.index`` of a value with leading draw dims (plate slots dropped); a value without
    draw dims (a point estimate) is the same for every draw (``draw`` None: the value as it is)."""
    value = strip_plate_slots(value, core)
    lead = value.dim() - core
    if lead == 0 or draw is None:
        return value
    event = value.shape[lead:]
    full = value.reshape((1,) * (len(draw.draws) - lead) + value.shape).expand(*draw.draws, *event)
    return full.reshape(-1, *event)[draw.index]


@contextmanager
def one_draw(cache: dict[str, torch.Tensor], cores: dict[str, int], draw: Draw) -> Iterator[None]:
    """Within the block, the module cache holds draw ``draw.index`` of every sampled site named in
    ``cores`` (``{site: its event dims}``); the batched values are put back after."""
    kept = {name: cache[name] for name in cores if name in cache}
    token = _DRAW.set(draw)
    try:
        for name, value in kept.items():
            cache[name] = select_draw(value, cores[name], draw)
        yield
    finally:
        _DRAW.reset(token)
        cache.update(kept)
