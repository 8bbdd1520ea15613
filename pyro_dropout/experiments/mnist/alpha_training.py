"""Training a classifier with the dropout ELBO (α = 0) or BB-α, and its MC-dropout class
probabilities on many images."""

from __future__ import annotations

from typing import Any

import pyro
import torch

from ...guides import DropoutGuide
from ...infer import BBAlpha, DropoutELBO, predict
from .settings import MnistSettings
from .training import train_classifier

__all__ = ["alpha_loss", "mc_probs", "train_with_alpha"]

_BATCH = 1000  # images per prediction pass


def alpha_loss(alpha: float, particles: int) -> Any:
    """BB-α with ``particles`` masks per image (Keras-style per-example masks, as paper 003's code
    draws them); ``alpha=0``: the dropout ELBO, averaged over as many masks."""
    if alpha == 0:
        return DropoutELBO(num_particles=particles, per_example_masks=True)
    return BBAlpha(alpha, num_particles=particles, per_example_masks=True)


def train_with_alpha(
    model: Any,
    data: tuple[torch.Tensor, torch.Tensor],
    settings: MnistSettings,
    *,
    alpha: float | None,
    particles: int,
    dropout: float | None = None,
    seed: int,
    progress: bool = True,
    desc: str = "",
) -> DropoutGuide:
    """Train ``model`` on ``data`` with drop probability ``dropout`` (``None``: the rates its layers
    declare); ``alpha=None``: without dropout (p = 0 everywhere: a point estimate, the prior a
    weight decay). Returns the guide."""
    pyro.clear_param_store()  # the guides of one run share parameter names
    pyro.set_rng_seed(seed)
    guide = DropoutGuide(model, dropout=0.0 if alpha is None else dropout)
    loss = DropoutELBO() if alpha is None else alpha_loss(alpha, particles)
    s = settings
    train_classifier(
        model,
        guide,
        data,
        epochs=s.epochs,
        batch_size=s.batch_size,
        lr=s.lr,
        loss=loss,
        seed=seed,
        progress=progress,
        desc=desc,
    )
    return guide


def mc_probs(model: Any, guide: Any, x: torch.Tensor, num_samples: int) -> torch.Tensor:
    """``[T, N, C]``: the class probabilities of ``num_samples`` MC-dropout passes, in batches."""
    with torch.no_grad():
        parts = [
            predict(model, guide, x[i : i + _BATCH], num_samples=num_samples, return_sites=["logits"])
            .samples["logits"]
            .softmax(-1)
            for i in range(0, len(x), _BATCH)
        ]
    return torch.cat(parts, dim=1)
