r"""LeNet for MNIST-sized images, its weights sample sites (paper 000 §5.2: Caffe's LeNet).

``conv(20, 5x5) → max-pool 2 → conv(50, 5x5) → max-pool 2 → fc 500 → ReLU → fc 10``, with dropout
before the last fully connected layer (``dropout=0.5``, paper 000 §5.2) and optionally before
every weight layer (``dropout_all=p``: "LeNet-all"). Batched over draws like
:class:`~pyro_dropout.nn.MLP`: every layer takes weights with leading draw dimensions.

Usage:

    model = LeNet(num_data=len(x_train))            # Caffe's weight decay 5e-4 as the prior
    guide = DropoutGuide(model)                     # the rates the layers declare
    svi.step(x_batch, y_batch, num_data=len(x_train))
"""

from __future__ import annotations

import math

import pyro
import pyro.distributions as dist
import torch
from pyro.nn import PyroModule

from .conv import Conv2d
from .functional import flatten, max_pool2d
from .layers import Linear

__all__ = ["LeNet", "length_scale_for", "observe_classes"]


def length_scale_for(weight_decay: float, num_data: int, p: float) -> float:
    r"""The prior length-scale whose KL term is a weight decay :math:`\lambda` on ``num_data``
    examples for a layer with drop probability ``p``: per example the KL of a weight with mean
    :math:`M` is :math:`l^2 M^2 / (2N(1-p))` (with inverted-dropout means, ``docs/maths.md``),
    and the decay :math:`\lambda M^2/2`, so :math:`l = \sqrt{\lambda N (1-p)}`."""
    if num_data < 1 or weight_decay <= 0 or not 0 <= p < 1:
        raise ValueError(
            f"length_scale_for: need weight_decay > 0, num_data >= 1, 0 <= p < 1; got {weight_decay}, "
            f"{num_data}, {p}"
        )
    return math.sqrt(weight_decay * num_data * (1.0 - p))


def observe_classes(logits: torch.Tensor, y: torch.Tensor | None, num_data: int | None) -> torch.Tensor:
    """``Categorical(logits=logits)`` observed (or sampled) in a plate ``"data"`` over the images,
    scaled to ``num_data`` of them; records ``"logits"``. ``logits``: ``[..., N, classes]``."""
    n = logits.shape[-2]
    with pyro.plate("data", num_data or n, subsample=torch.arange(n, device=logits.device)):
        logits = pyro.deterministic("logits", logits, event_dim=1)
        return pyro.sample("obs", dist.Categorical(logits=logits), obs=y)


class LeNet(PyroModule):
    """LeNet with a ``Categorical(logits=...)`` likelihood over ``classes``.

    :param dropout: the drop probability of the last layer's inputs (the 500 hidden units).
    :param dropout_all: the drop probability of every other layer's inputs (0: none); the first
        convolution's input is masked only where it has more than one channel, as a weight with
        one input unit gets p = 0 by default (masking it drops the whole image in a fraction p of
        the draws).
    :param weight_decay: the weight decay the priors amount to on ``num_data`` examples (Caffe's
        LeNet: 5e-4), one prior length-scale per layer (:func:`length_scale_for`).
    """

    def __init__(
        self,
        classes: int = 10,
        *,
        channels: int = 1,
        dropout: float = 0.5,
        dropout_all: float = 0.0,
        weight_decay: float = 5e-4,
        num_data: int = 60_000,
        image_size: int = 28,
    ) -> None:
        super().__init__()
        side = ((image_size - 4) // 2 - 4) // 2
        if side < 1:
            raise ValueError(f"LeNet: images of side {image_size} are too small (at least 16)")
        scale = length_scale_for(weight_decay, num_data, dropout_all)
        # a single input channel is not masked (a fraction p of the draws would see a blank image)
        first = dropout_all if channels > 1 else 0.0
        self.conv1 = Conv2d(channels, 20, 5, length_scale=scale, dropout=first)
        self.conv2 = Conv2d(20, 50, 5, length_scale=scale, dropout=dropout_all)
        self.fc1 = Linear(50 * side * side, 500, length_scale=scale, dropout=dropout_all)
        last = length_scale_for(weight_decay, num_data, dropout)
        self.fc2 = Linear(500, classes, length_scale=last, dropout=dropout)

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        """``[..., N, classes]`` for images ``[N, C, H, W]`` (leading dims: draws)."""
        h = max_pool2d(self.conv1(x), 2)
        h = max_pool2d(self.conv2(h), 2)
        h = torch.relu(self.fc1(flatten(h, 3)))
        return self.fc2(h)

    def forward(
        self, x: torch.Tensor, y: torch.Tensor | None = None, num_data: int | None = None
    ) -> torch.Tensor:
        return observe_classes(self.logits(x), y, num_data)
