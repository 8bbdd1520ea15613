"""Concrete dropout on LeNet: the drop probabilities learned per layer."""

from __future__ import annotations

from typing import Any

from ..data import ImageSplits
from ..probs import BATCH, Probs, image_sets, mc_probs
from ..settings import MnistSettings
from ..training import train_lenet

__all__ = ["fit_concrete"]


def fit_concrete(
    splits: ImageSplits, s: MnistSettings, progress: bool
) -> tuple[dict[str, Probs], dict[str, Any]]:
    model, guide = train_lenet(splits.train, s, concrete=True, progress=progress, desc="Concrete dropout")
    rates = {k: float(v) for k, v in guide.dropout_rates().items() if float(v) > 0}
    probs = {k: mc_probs(model, guide, x, s.num_samples, BATCH) for k, x in image_sets(splits).items()}
    return {"concrete": probs}, {"learned_p": rates}
