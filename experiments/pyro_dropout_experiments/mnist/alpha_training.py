"""Training a classifier with the dropout ELBO (α = 0) or BB-α."""

from __future__ import annotations

from typing import Any

import pyro
import torch

from pyro_dropout.guides import DropoutGuide
from pyro_dropout.infer import BBAlpha, DropoutELBO

from .settings import MnistSettings
from .training import train_with_settings

__all__ = ["alpha_loss", "train_with_alpha"]


def alpha_loss(alpha: float, particles: int) -> Any:
    """BB-α with ``particles`` masks per image (per-example masks, as Keras's dropout layers draw
    them); ``alpha=0``: the dropout ELBO, averaged over as many masks."""
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
    train_with_settings(model, guide, data, settings, loss=loss, seed=seed, progress=progress, desc=desc)
    return guide
