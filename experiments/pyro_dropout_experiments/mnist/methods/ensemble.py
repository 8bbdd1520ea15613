"""A deep ensemble of LeNets without dropout: one pass of each member is one draw."""

from __future__ import annotations

from typing import Any

import torch

from ..data import ImageSplits
from ..probs import Probs, image_sets, in_batches, standard_logits
from ..settings import MnistSettings
from ..training import train_lenet

__all__ = ["fit_ensemble"]


def fit_ensemble(
    splits: ImageSplits, s: MnistSettings, progress: bool
) -> tuple[dict[str, Probs], dict[str, Any]]:
    """``s.ensemble_size`` networks without dropout from different initialisations and minibatch
    orders, each one pass; their softmaxes are the draws."""
    size = s.ensemble_size
    members: dict[str, list[torch.Tensor]] = {k: [] for k in image_sets(splits)}
    for m in range(size):
        desc = f"ensemble {m + 1}/{size}"
        model, guide = train_lenet(
            splits.train, s, dropout=0.0, seed=s.seed + 1 + m, progress=progress, desc=desc
        )
        for k, x in image_sets(splits).items():
            members[k].append(in_batches(standard_logits(model, guide), x).softmax(-1))
    return {"ensemble": {k: torch.stack(v) for k, v in members.items()}}, {"size": size}
