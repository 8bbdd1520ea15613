r"""The batches of a data set as the front door takes them: one batch given directly, or any
iterable (a ``DataLoader``) of batches, one at a time (never all in memory).

A batch's inputs are what the network's forward takes: one tensor ``x``, a tuple of positional
inputs ``(x, t)``, or a dict of keyword inputs (``{"input_ids": ..., "attention_mask": ...}``).
A loader's batch is ``x``, ``(x,)``, ``(x, y)`` (``x`` any of those three), or a dict whose
``"labels"`` (Hugging Face's name; or ``"label"``) are the targets and whose other keys are the
inputs. Given directly, a tuple is several inputs and a dict keyword inputs."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch

from .guards import tensors_of

__all__ = ["TARGET_KEYS", "batches", "is_one_batch"]

TARGET_KEYS = ("labels", "label")  # a dict batch's targets (Hugging Face's collators: "labels")


def _check_devices(batch: Any, where: str) -> None:
    if any(t.device.type == "meta" for t in tensors_of((batch,), {})):
        raise ValueError(
            f"{where}: a batch is on the meta device, which holds shapes but no values: move it "
            "to the CPU or a GPU (.to('cpu'))"
        )


def _split_dict(batch: dict, where: str) -> tuple[dict, torch.Tensor | None]:
    """A dict batch's inputs (every key but the targets') and targets."""
    found = [k for k in TARGET_KEYS if k in batch]
    if len(found) > 1:
        raise ValueError(
            f"{where}: a dict batch holds both {found[0]!r} and {found[1]!r}: which are the targets?"
        )
    inputs = {k: v for k, v in batch.items() if k not in found}
    if not inputs:
        raise ValueError(f"{where}: a dict batch holds targets ({found[0]!r}) and no inputs")
    y = batch[found[0]] if found else None
    if y is not None and not isinstance(y, torch.Tensor):
        raise TypeError(
            f"{where}: a dict batch's {found[0]!r} is a {type(y).__name__}, not a tensor of targets"
        )
    return inputs, y


def _inputs(x: Any, where: str) -> Any:
    """A batch's inputs as the model takes them: a tensor, a tuple (a collated list made a tuple),
    or a dict."""
    if isinstance(x, torch.Tensor | dict):
        return x
    if isinstance(x, list | tuple) and x:
        return tuple(x)
    raise TypeError(
        f"{where}: a batch's inputs must be a tensor, a tuple of the forward's inputs or a dict of "
        f"them, got {type(x).__name__}"
    )


def _one(batch: Any, where: str) -> tuple[Any, torch.Tensor | None]:
    _check_devices(batch, where)
    if isinstance(batch, torch.Tensor):
        return batch, None
    if isinstance(batch, dict):
        return _split_dict(batch, where)
    if not isinstance(batch, list | tuple):
        raise TypeError(
            f"{where}: a batch must be a tensor x, a pair (x, y) or a dict of inputs and 'labels', "
            f"got {type(batch).__name__}"
        )
    if len(batch) not in (1, 2):
        raise ValueError(
            f"{where}: a batch holds {len(batch)} items; give (x, y) batches. For a network of several "
            "inputs, give ((x1, x2, ...), y) batches (a dataset returning ((x1, x2), y)) or dicts of "
            "keyword inputs and 'labels'"
        )
    y = batch[1] if len(batch) == 2 else None
    if y is not None and not isinstance(y, torch.Tensor):
        raise TypeError(
            f"{where}: a batch's targets (its second item) must be a tensor, got {type(y).__name__}"
        )
    return _inputs(batch[0], where), y


def is_one_batch(data: Any) -> bool:
    """Whether ``data`` given directly is one batch's inputs: a tuple of inputs that holds no
    container (a tuple of batches would), or a dict."""
    if isinstance(data, dict):
        return True
    return (
        isinstance(data, tuple) and bool(data) and not any(isinstance(v, list | tuple | dict) for v in data)
    )


def batches(data: Any, where: str) -> Iterator[tuple[Any, torch.Tensor | None]]:
    """``(x, y)`` of each batch of ``data`` (``y`` None where the batch has no targets); a tensor, a
    tuple of inputs or a dict is one batch. An iterable that gives no batch is refused."""
    if isinstance(data, torch.Tensor):
        yield _one(data, where)
        return
    if is_one_batch(data):
        _check_devices(data, where)
        yield _split_dict(data, where) if isinstance(data, dict) else (data, None)
        return
    if isinstance(data, list) and data and all(isinstance(t, torch.Tensor) for t in data):
        raise TypeError(
            f"{where}: x is a list of {len(data)} tensors; give a network of several inputs a tuple "
            "(x1, x2, ...) or a dict of keyword inputs, or give a DataLoader of (x, y) batches"
        )
    try:
        items = iter(data)
    except TypeError:
        raise TypeError(
            f"{where}: expected a tensor, a tuple or dict of inputs, or an iterable of batches (a "
            f"DataLoader), got {type(data).__name__}"
        ) from None
    count = 0
    for batch in items:
        count += 1
        yield _one(batch, where)
    if count == 0:
        raise ValueError(f"{where}: the data loader gave no batch")
