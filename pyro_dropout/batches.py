r"""The batches of a data set as the front door takes them: a tensor, or any iterable (a
``DataLoader``) of ``x`` or ``(x,)`` or ``(x, y)`` batches, one at a time (never all in memory)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch

__all__ = ["batches"]


def _one(batch: Any, where: str) -> tuple[torch.Tensor, torch.Tensor | None]:
    for t in batch if isinstance(batch, list | tuple) else (batch,):
        if isinstance(t, torch.Tensor) and t.device.type == "meta":
            raise ValueError(
                f"{where}: a batch is on the meta device, which holds shapes but no values: move it "
                "to the CPU or a GPU (.to('cpu'))"
            )
    if isinstance(batch, torch.Tensor):
        return batch, None
    if isinstance(batch, dict):
        raise TypeError(
            f"{where}: a batch is a dict (keys {sorted(map(str, batch))}); give (x, y) batches, e.g. a "
            "collate_fn or a generator returning (batch['input_ids'], batch['labels'])"
        )
    if not isinstance(batch, list | tuple) or not all(isinstance(t, torch.Tensor) for t in batch):
        raise TypeError(
            f"{where}: a batch must be a tensor x or a pair (x, y) of tensors, got {type(batch).__name__}"
        )
    if len(batch) not in (1, 2):
        raise ValueError(
            f"{where}: a batch holds {len(batch)} tensors; give (x, y) batches. For a network of several "
            "inputs, convert a wrapper module whose forward takes one tensor and splits it"
        )
    return batch[0], batch[1] if len(batch) == 2 else None


def batches(data: Any, where: str) -> Iterator[tuple[torch.Tensor, torch.Tensor | None]]:
    """``(x, y)`` of each batch of ``data`` (``y`` None where the batch has no targets); a tensor
    is one batch. An iterable that gives no batch is refused."""
    if isinstance(data, torch.Tensor):
        yield _one(data, where)
        return
    if isinstance(data, tuple | list) and data and all(isinstance(t, torch.Tensor) for t in data):
        raise TypeError(
            f"{where}: x is a {type(data).__name__} of {len(data)} tensors; give one tensor x [N, ...] or "
            "a DataLoader of (x, y) batches. For a network of several inputs, convert a wrapper module "
            "whose forward takes one tensor and splits it (torch.cat of the inputs' features in, "
            "slices inside)"
        )
    try:
        items = iter(data)
    except TypeError:
        raise TypeError(
            f"{where}: expected a tensor or an iterable of batches (a DataLoader), got {type(data).__name__}"
        ) from None
    count = 0
    for batch in items:
        count += 1
        yield _one(batch, where)
    if count == 0:
        raise ValueError(f"{where}: the data loader gave no batch")
