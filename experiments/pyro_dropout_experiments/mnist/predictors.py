"""Each method of the OOD comparison, trained and turned into sampled class probabilities."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from pyro_dropout.infer import predict, predict_standard
from pyro_dropout.metrics import fit_temperature

from .data import ImageSplits
from .settings import MnistSettings
from .training import train_lenet

__all__ = ["METHODS", "Probs", "mc_probs", "run_method"]

Probs = dict[str, torch.Tensor]  # per image set ("test", an OOD set): probabilities [T, N, C]
_BATCH = 2000  # images per prediction pass


def _sets(splits: ImageSplits) -> dict[str, torch.Tensor]:
    return {"test": splits.test[0], **splits.ood}


def _in_batches(
    fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, batch: int = _BATCH
) -> torch.Tensor:
    return torch.cat([fn(x[i : i + batch]) for i in range(0, len(x), batch)], dim=-2)


def _mc_logits(model: Any, guide: Any, num_samples: int) -> Callable[[torch.Tensor], torch.Tensor]:
    """The logits of T stochastic passes, ``[T, N, C]``; their softmax is the MC-dropout draws."""

    def logits(x: torch.Tensor) -> torch.Tensor:
        return predict(model, guide, x, num_samples=num_samples, return_sites=["logits"]).samples["logits"]

    return logits


def mc_probs(model: Any, guide: Any, x: torch.Tensor, num_samples: int, batch: int = 1000) -> torch.Tensor:
    """``[T, N, C]``: the class probabilities of ``num_samples`` MC-dropout passes, ``batch``
    images at a time."""
    return _in_batches(_mc_logits(model, guide, num_samples), x, batch).softmax(-1)


def _standard_logits(model: Any, guide: Any) -> Callable[[torch.Tensor], torch.Tensor]:
    return lambda x: predict_standard(model, guide, x).samples["logits"][0]


def _logits_and_temperature(
    fn: Callable[[torch.Tensor], torch.Tensor], splits: ImageSplits
) -> tuple[dict[str, torch.Tensor], float]:
    """``fn``'s logits on every image set, and the temperature fitted to them on the validation images."""
    logits = {k: _in_batches(fn, x) for k, x in _sets(splits).items()}
    return logits, fit_temperature(_in_batches(fn, splits.val[0]), splits.val[1])


def mc_dropout(splits: ImageSplits, s: MnistSettings, progress: bool) -> tuple[Probs, dict, dict]:
    """MC dropout (T passes), and from the same network: MC dropout with a temperature (one T for
    every pass, fitted on the validation images to the NLL of their average), the standard network
    (expected weights) and its temperature-scaled version: four methods, one training."""
    model, guide = train_lenet(splits.train, s, progress=progress, desc="MC dropout")
    mc, t_mc = _logits_and_temperature(_mc_logits(model, guide, s.num_samples), splits)
    logits, temperature = _logits_and_temperature(_standard_logits(model, guide), splits)
    others = {
        "mc-dropout-temperature": {k: (v / t_mc).softmax(-1) for k, v in mc.items()},
        "standard": {k: v.softmax(-1)[None] for k, v in logits.items()},
        "temperature": {k: (v / temperature).softmax(-1)[None] for k, v in logits.items()},
    }
    mc_probs = {k: v.softmax(-1) for k, v in mc.items()}
    return mc_probs, others, {"temperature": temperature, "mc_temperature": t_mc}


def concrete(splits: ImageSplits, s: MnistSettings, progress: bool) -> tuple[Probs, dict]:
    model, guide = train_lenet(splits.train, s, concrete=True, progress=progress, desc="Concrete dropout")
    rates = {k: float(v) for k, v in guide.dropout_rates().items() if float(v) > 0}
    probs = {k: mc_probs(model, guide, x, s.num_samples, _BATCH) for k, x in _sets(splits).items()}
    return probs, {"learned_p": rates}


def ensemble(splits: ImageSplits, s: MnistSettings, progress: bool, size: int) -> Probs:
    """``size`` networks without dropout from different initialisations and minibatch orders, each
    one pass; their softmaxes are the draws."""
    members: dict[str, list[torch.Tensor]] = {k: [] for k in _sets(splits)}
    for m in range(size):
        desc = f"ensemble {m + 1}/{size}"
        model, guide = train_lenet(
            splits.train, s, dropout=0.0, seed=s.seed + 1 + m, progress=progress, desc=desc
        )
        for k, x in _sets(splits).items():
            members[k].append(_in_batches(_standard_logits(model, guide), x).softmax(-1))
    return {k: torch.stack(v) for k, v in members.items()}


METHODS = ("mc-dropout", "mc-dropout-temperature", "standard", "temperature", "concrete", "ensemble")
_SHARED = ("mc-dropout", "mc-dropout-temperature", "standard", "temperature")  # one training


def run_method(
    name: str, splits: ImageSplits, s: MnistSettings, progress: bool
) -> tuple[dict[str, Probs], dict]:
    """The probabilities of ``name`` (and of the methods that share its training) and what it learned."""
    if name in _SHARED:
        mc, others, info = mc_dropout(splits, s, progress)
        return {"mc-dropout": mc, **others}, info
    if name == "concrete":
        probs, info = concrete(splits, s, progress)
        return {"concrete": probs}, info
    if name == "ensemble":
        return {"ensemble": ensemble(splits, s, progress, s.ensemble_size)}, {"size": s.ensemble_size}
    raise ValueError(f"unknown method {name!r}; known: {', '.join(METHODS)}")
