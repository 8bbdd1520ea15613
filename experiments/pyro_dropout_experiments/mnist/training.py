"""Minibatch SVI for an image classifier, with a progress bar per epoch."""

from __future__ import annotations

from typing import Any, cast

import pyro
import torch
from pyro.infer import SVI

from pyro_dropout.guides import DropoutGuide
from pyro_dropout.infer import DropoutELBO
from pyro_dropout.nn import LeNet

from ..core.progress import Progress
from .settings import MnistSettings

__all__ = ["train_classifier", "train_lenet", "train_with_settings"]


def train_classifier(
    model: Any,
    guide: Any,
    data: tuple[torch.Tensor, torch.Tensor],
    *,
    epochs: float,
    batch_size: int = 128,
    lr: float = 1e-3,
    loss: Any = None,
    seed: int = 0,
    progress: bool = True,
    desc: str = "training",
) -> list[float]:
    """Train ``model(x, y, num_data=N)`` with ``guide`` by Adam on shuffled minibatches for
    ``epochs`` passes (a fraction runs that share of the steps); returns the mean loss per
    example of each epoch. ``loss``: default :class:`~pyro_dropout.infer.DropoutELBO`."""
    x, y = data
    n = len(x)
    steps_per_epoch = max(1, -(-n // batch_size))
    total = max(1, round(epochs * steps_per_epoch))
    svi = SVI(model, guide, cast(Any, pyro.optim).Adam({"lr": lr}), loss or DropoutELBO())
    generator = torch.Generator().manual_seed(seed)
    pyro.set_rng_seed(seed)
    losses: list[float] = []
    running = 0.0
    bar = Progress(total=total, desc=desc, disable=not progress, leave=False, unit="step")
    for step in range(total):
        if step % steps_per_epoch == 0:
            order = torch.randperm(n, generator=generator)
        rows = order[(step % steps_per_epoch) * batch_size :][:batch_size]
        running += svi.step(x[rows], y[rows], num_data=n) / n
        bar.update()
        if (step + 1) % steps_per_epoch == 0 or step + 1 == total:
            losses.append(running / ((step % steps_per_epoch) + 1))
            bar.set_postfix(loss=f"{losses[-1]:.4f}")
            running = 0.0
    bar.close()
    return losses


def train_with_settings(
    model: Any,
    guide: Any,
    data: tuple[torch.Tensor, torch.Tensor],
    settings: MnistSettings,
    *,
    loss: Any = None,
    seed: int | None = None,
    progress: bool = True,
    desc: str = "training",
) -> list[float]:
    """:func:`train_classifier` with the settings' epochs, minibatch size and learning rate
    (``seed``: default the settings')."""
    s = settings
    return train_classifier(
        model,
        guide,
        data,
        epochs=s.epochs,
        batch_size=s.batch_size,
        lr=s.lr,
        loss=loss,
        seed=s.seed if seed is None else seed,
        progress=progress,
        desc=desc,
    )


def train_lenet(
    data: tuple[torch.Tensor, torch.Tensor],
    settings: MnistSettings,
    *,
    dropout: float = 0.5,
    concrete: bool = False,
    seed: int | None = None,
    progress: bool = True,
    desc: str = "LeNet",
) -> tuple[LeNet, DropoutGuide]:
    """A :class:`~pyro_dropout.nn.LeNet` with ``dropout`` on its last layer's inputs (learned from
    there with ``concrete``; ``dropout=0``: no dropout, a MAP network), trained on ``data``."""
    pyro.clear_param_store()  # the guides of one run share parameter names
    model = LeNet(dropout=dropout, num_data=len(data[0]))
    # the layers' declared rates; 0 everywhere given as such (the guide would warn of no masks)
    guide = DropoutGuide(model, dropout=None if dropout or concrete else 0.0, concrete=concrete)
    train_with_settings(model, guide, data, settings, seed=seed, progress=progress, desc=desc)
    return model, guide
