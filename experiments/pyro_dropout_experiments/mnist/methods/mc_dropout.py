"""MC dropout on LeNet, and what the same training gives besides: MC dropout with a temperature,
the standard network (expected weights) and its temperature-scaled version."""

from __future__ import annotations

from typing import Any

from ..data import ImageSplits
from ..probs import Probs, logits_and_temperature, mc_logits, standard_logits
from ..settings import MnistSettings
from ..training import train_lenet

__all__ = ["MC_DROPOUT_METHODS", "fit_mc_dropout"]

# the methods one MC-dropout training scores
MC_DROPOUT_METHODS = ("mc-dropout", "mc-dropout-temperature", "standard", "temperature")


def fit_mc_dropout(
    splits: ImageSplits, s: MnistSettings, progress: bool
) -> tuple[dict[str, Probs], dict[str, Any]]:
    """MC dropout (T passes), and from the same network: MC dropout with a temperature (one T for
    every pass, fitted on the validation images to the NLL of their average), the standard network
    (expected weights) and its temperature-scaled version: four methods, one training."""
    model, guide = train_lenet(splits.train, s, progress=progress, desc="MC dropout")
    mc, t_mc = logits_and_temperature(mc_logits(model, guide, s.num_samples), splits)
    logits, temperature = logits_and_temperature(standard_logits(model, guide), splits)
    probs = {
        "mc-dropout": {k: v.softmax(-1) for k, v in mc.items()},
        "mc-dropout-temperature": {k: (v / t_mc).softmax(-1) for k, v in mc.items()},
        "standard": {k: v.softmax(-1)[None] for k, v in logits.items()},
        "temperature": {k: (v / temperature).softmax(-1)[None] for k, v in logits.items()},
    }
    return probs, {"temperature": temperature, "mc_temperature": t_mc}
