r"""LeNet for MNIST-sized images, its weights sample sites (paper 000 §5.2: Caffe's LeNet).

``conv(20, 5x5) → max-pool 2 → conv(50, 5x5) → max-pool 2 → fc 500 → ReLU → fc 10``, with dropout
before the last fully connected layer (``dropout=0.5``, paper 000 §5.2) and optionally before
every weight layer (``dropout_all=p``: "LeNet-all"). Batched over draws like
:class:`~pyro_dropout.nn.MLP`: every layer takes weights with leading draw dimensions.

Usage:

    model = LeNet(num_data=len(x_train))            # the data's size: the priors and the minibatch scale
    guide = DropoutGuide(model)                     # the rates the layers declare
    svi.step(x_batch, y_batch)                      # the labels at site "obs", scaled to num_data
"""

from __future__ import annotations

import math
from typing import Any

import pyro
import pyro.distributions as dist
import torch
from pyro.nn import PyroModule

from ..ops import is_positive_int
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


def check_num_data(num_data: Any, what: str) -> int | None:
    """``num_data``, the size of the data set (``None``: the batch is the data), checked."""
    if num_data is None:
        return None
    if not is_positive_int(num_data):
        raise ValueError(
            f"{what}: num_data must be a whole number >= 1 (the data set's size), got {num_data!r}"
        )
    return num_data


def observe_classes(logits: torch.Tensor, y: torch.Tensor | None, num_data: int | None) -> torch.Tensor:
    """``Categorical(logits=logits)`` observed (or sampled) in the plate ``"data"`` over the images,
    and scaled to ``num_data`` of them when observed (a minibatch of the data); records the logits
    as ``"logits"`` and the labels as ``"obs"`` (``pred.probs["obs"]``: ``[T, N, classes]``).
    ``logits``: ``[..., N, classes]``."""
    n = logits.shape[-2]
    if num_data is not None and y is not None and num_data < n:
        raise ValueError(f"num_data={num_data} is smaller than the {n} labelled rows of this batch")
    size = num_data if num_data is not None and y is not None else n  # predictions need no scale
    with pyro.plate("data", size, subsample=torch.arange(n, device=logits.device)):
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
        self.num_data = check_num_data(num_data, "LeNet")
        self.image_shape = (channels, image_size, image_size)
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
        if tuple(x.shape[-3:]) != self.image_shape:
            c, side, _ = self.image_shape
            raise ValueError(
                f"LeNet: built for images [N, {c}, {side}, {side}], got x of shape {tuple(x.shape)}: build "
                f"LeNet(channels={x.shape[-3] if x.dim() >= 3 else c}, image_size=...) for other images"
            )
        h = max_pool2d(self.conv1(x), 2)
        h = max_pool2d(self.conv2(h), 2)
        h = torch.relu(self.fc1(flatten(h, 3)))
        return self.fc2(h)

    def forward(
        self, x: torch.Tensor, y: torch.Tensor | None = None, num_data: int | None = None
    ) -> torch.Tensor:
        """Observe ``y`` (labels ``[N]``) at site ``"obs"``, scaled to the data set's size: the
        ``num_data`` the network was built with (the one that set its priors); a different one is
        refused, as a subset of the data needs a network built for its size."""
        if num_data is not None and check_num_data(num_data, "LeNet.forward") != self.num_data:
            raise ValueError(
                f"LeNet was built for num_data={self.num_data} (its priors' weight decay); the likelihood's "
                f"num_data={num_data} must be the same: build "
                f"LeNet(num_data={num_data}), or leave it out here"
            )
        return observe_classes(self.logits(x), y, self.num_data)
