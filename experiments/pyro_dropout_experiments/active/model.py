"""The network of each round and the pool it acquires from.

Each round trains Gal, Islam & Ghahramani (2017)'s CNN (:class:`~pyro_dropout.nn.KerasCNN` with
4x4 kernels, 128 hidden units, rates 0.25 and 0.5) by SVI with :class:`~pyro_dropout.DropoutELBO`
on the labelled images, its prior scaled to their number.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, cast

import pyro
import torch
from pyro.infer import SVI

from pyro_dropout import DropoutELBO, DropoutGuide
from pyro_dropout.datasets import load_images
from pyro_dropout.nn import KerasCNN, length_scale_for

from ..mnist.data import default_device_tensor
from .settings import ActiveSettings

__all__ = ["DENSE_RATE", "fitter", "load_pool", "network", "passes"]

DENSE_RATE = 0.25  # the dropout before the first dense layer (0.5 before the second)


def fitter(s: ActiveSettings, seed: int) -> Callable[..., tuple[Any, Any]]:
    """``fit(x, y, last=None) -> (model, guide)``: ``s.epochs`` passes of minibatches over the
    labelled images, or as many more as ``s.steps`` steps need (``last``: the previous round's pair,
    trained on with the new rows)."""
    g = torch.Generator().manual_seed(seed)

    def fit(x: torch.Tensor, y: torch.Tensor, last: tuple[Any, Any] | None = None) -> tuple[Any, Any]:
        n = len(x)
        if last is None:
            pyro.clear_param_store()
            model = network(s)
            guide = DropoutGuide(model)
        else:
            model, guide = last
        svi = SVI(model, guide, cast(Any, pyro.optim).Adam({"lr": s.lr}), DropoutELBO())
        pyro.set_rng_seed(int(torch.randint(2**31, (1,), generator=g)))
        for _ in range(passes(n, s)):
            order = torch.randperm(n, generator=g)
            for i in range(0, n, s.batch_size):
                rows = order[i : i + s.batch_size].to(x.device)
                svi.step(x[rows], y[rows], num_data=n)
        return model, guide

    return fit


def network(s: ActiveSettings) -> KerasCNN:
    """The paper's network, every prior of length-scale sqrt(0.1); ``s.weight_decay`` c > 0: the
    first dense layer's weights (not its bias) under the prior whose KL is the authors' Keras weight
    decay, c/N times their squared sum per image on N images (``length_scale_for`` with
    lambda = 2c/N, so l^2 = 2c(1 - p), whatever N)."""
    model = KerasCNN(kernel=4, hidden=128, dropout=(DENSE_RATE, 0.5))
    if s.weight_decay > 0:
        scale = 1.0 / length_scale_for(2 * s.weight_decay, 1, DENSE_RATE)
        model.fc1.prior_weight_scale.fill_(scale)
    return model


def passes(n: int, s: ActiveSettings) -> int:
    """The passes over ``n`` labelled images a round takes: ``s.epochs``, or more to reach ``s.steps``
    minibatch steps."""
    per_pass = math.ceil(n / s.batch_size)
    return max(s.epochs, math.ceil(s.steps / per_pass))


def load_pool(
    s: ActiveSettings, data_dir: Any = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(x_pool, y_pool, x_test, y_test)``: the first ``pool_size`` MNIST training images (all by
    default), each ``copies`` times (copies after the first with N(0, noise²) added, Kirsch et
    al.'s Repeated MNIST), and the first ``test_size`` test images."""
    train, test = load_images("mnist", "train", data_dir), load_images("mnist", "test", data_dir)
    for name, size, have in (("pool-size", s.pool_size, len(train)), ("test-size", s.test_size, len(test))):
        if size is not None and size > have:
            raise ValueError(f"--{name} {size} is more than the {have} MNIST images there")
    x, y = default_device_tensor(train.x[: s.pool_size]), default_device_tensor(train.y[: s.pool_size])
    if s.copies > 1:
        g = torch.Generator().manual_seed(s.seed)
        noisy = [x + s.noise * torch.randn(x.shape, generator=g).to(x.device) for _ in range(s.copies - 1)]
        x, y = torch.cat([x, *noisy]), y.repeat(s.copies)
    return x, y, default_device_tensor(test.x[: s.test_size]), default_device_tensor(test.y[: s.test_size])
