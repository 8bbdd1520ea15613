"""Minibatch SVI for an image classifier, with a progress bar per epoch."""

from __future__ import annotations

from typing import Any, cast

import pyro
import torch
from pyro.infer import SVI
from tqdm.auto import tqdm

from ...infer import DropoutELBO

__all__ = ["train_classifier"]


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
    bar = tqdm(total=total, desc=desc, disable=not progress, leave=False, unit="step")
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
