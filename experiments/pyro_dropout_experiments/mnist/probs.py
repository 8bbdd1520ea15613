"""Sampled class probabilities of a trained classifier on each image set: MC-dropout passes, the
standard network (expected weights), and logits with a temperature fitted on the validation images."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from pyro_dropout.metrics import fit_temperature
from pyro_dropout.prediction import predict, predict_standard

from .data import ImageSplits

__all__ = [
    "BATCH",
    "Probs",
    "image_sets",
    "in_batches",
    "logits_and_temperature",
    "mc_logits",
    "mc_probs",
    "standard_logits",
]

Probs = dict[str, torch.Tensor]  # per image set ("test", an OOD set): probabilities [T, N, C]
BATCH = 2000  # images per prediction pass


def image_sets(splits: ImageSplits) -> dict[str, torch.Tensor]:
    return {"test": splits.test[0], **splits.ood}


def in_batches(
    fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, batch: int = BATCH
) -> torch.Tensor:
    return torch.cat([fn(x[i : i + batch]) for i in range(0, len(x), batch)], dim=-2)


def mc_logits(model: Any, guide: Any, num_samples: int) -> Callable[[torch.Tensor], torch.Tensor]:
    """The logits of T stochastic passes, ``[T, N, C]``; their softmax is the MC-dropout draws."""

    def logits(x: torch.Tensor) -> torch.Tensor:
        return predict(model, guide, x, num_samples=num_samples, return_sites=["logits"]).samples["logits"]

    return logits


def mc_probs(model: Any, guide: Any, x: torch.Tensor, num_samples: int, batch: int = 1000) -> torch.Tensor:
    """``[T, N, C]``: the class probabilities of ``num_samples`` MC-dropout passes, ``batch``
    images at a time."""
    return in_batches(mc_logits(model, guide, num_samples), x, batch).softmax(-1)


def standard_logits(model: Any, guide: Any) -> Callable[[torch.Tensor], torch.Tensor]:
    return lambda x: predict_standard(model, guide, x).samples["logits"][0]


def logits_and_temperature(
    fn: Callable[[torch.Tensor], torch.Tensor], splits: ImageSplits
) -> tuple[dict[str, torch.Tensor], float]:
    """``fn``'s logits on every image set, and the temperature fitted to them on the validation images."""
    logits = {k: in_batches(fn, x) for k, x in image_sets(splits).items()}
    return logits, fit_temperature(in_batches(fn, splits.val[0]), splits.val[1])
