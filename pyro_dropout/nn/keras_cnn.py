r"""The convolutional network of Keras's MNIST example (Chollet, 2015), as paper 003 §5.2 runs it.

``conv(32, 3x3) → ReLU → conv(32, 3x3) → ReLU → max-pool 2 → dropout → fc 100 → ReLU → dropout →
fc 10``: dropout (``p = 0.5``) before each fully connected layer only (Gal, Islam & Ghahramani
2017's active-learning network is the same with 4x4 kernels, 128 hidden units and rates 0.25 and
0.5: ``KerasCNN(kernel=4, hidden=128, dropout=(0.25, 0.5))``), so the convolutions'
weights are point estimates (rate 0) and their output is computed once for every draw of the
masks; only the two fully connected layers run per draw. Weights are sample sites, batched over
draws like :class:`~pyro_dropout.nn.MLP`'s.

Usage:

    model = KerasCNN()
    guide = DropoutGuide(model)           # the rates the layers declare: 0.5 before each fc layer
    svi = SVI(model, guide, pyro.optim.Adam({"lr": 1e-3}), BBAlpha(0.5, num_particles=10))
"""

from __future__ import annotations

import math

import torch
from pyro.nn import PyroModule

from ..ops import is_positive_int
from .conv import Conv2d
from .functional import flatten, max_pool2d
from .layers import Linear
from .lenet import check_num_data, observe_classes

__all__ = ["KerasCNN"]


class KerasCNN(PyroModule):
    """Chollet's MNIST CNN with a ``Categorical(logits=...)`` likelihood over ``classes``.

    :param filters: convolution filters of both layers (32).
    :param hidden: units of the fully connected hidden layer (paper 003: 100; Keras: 128).
    :param kernel: the side of both convolutions' kernels (3).
    :param dropout: the drop probability before each fully connected layer, or a pair: the first's
        and the second's.
    :param length_scale: the prior length-scale of every layer (paper 003: ``l² = 0.1``).
    :param num_data: the data set's size: a labelled minibatch is scaled to it (``None``: each
        batch is the whole data).
    """

    def __init__(
        self,
        classes: int = 10,
        *,
        channels: int = 1,
        filters: int = 32,
        hidden: int = 100,
        kernel: int = 3,
        dropout: float | tuple[float, float] = 0.5,
        length_scale: float = math.sqrt(0.1),
        image_size: int = 28,
        num_data: int | None = None,
    ) -> None:
        super().__init__()
        self.num_data = check_num_data(num_data, "KerasCNN")
        if not is_positive_int(kernel):
            raise ValueError(f"KerasCNN: kernel must be a positive int, got {kernel!r}")
        side = (image_size - 2 * (kernel - 1)) // 2
        if side < 1:
            raise ValueError(
                f"KerasCNN: images of side {image_size} are too small for {kernel}x{kernel} kernels "
                f"(at least {2 * kernel})"
            )
        if isinstance(dropout, tuple | list) and len(dropout) != 2:
            raise ValueError(
                "KerasCNN: dropout must be one rate or a pair (before the dense layer, before the "
                f"output), got {dropout!r}"
            )
        p1, p2 = dropout if isinstance(dropout, tuple | list) else (dropout, dropout)
        self.conv1 = Conv2d(channels, filters, kernel, length_scale=length_scale, dropout=0.0)
        self.conv2 = Conv2d(filters, filters, kernel, length_scale=length_scale, dropout=0.0)
        self.fc1 = Linear(filters * side * side, hidden, length_scale=length_scale, dropout=p1)
        self.fc2 = Linear(hidden, classes, length_scale=length_scale, dropout=p2)

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        """``[..., N, classes]`` for images ``[N, C, H, W]`` (leading dims: draws)."""
        h = torch.relu(self.conv1(x))
        h = max_pool2d(torch.relu(self.conv2(h)), 2)
        h = torch.relu(self.fc1(flatten(h, 3)))
        return self.fc2(h)

    def forward(
        self, x: torch.Tensor, y: torch.Tensor | None = None, num_data: int | None = None
    ) -> torch.Tensor:
        if num_data is not None and self.num_data is not None and num_data != self.num_data:
            raise ValueError(f"KerasCNN was built for num_data={self.num_data}; got num_data={num_data} here")
        return observe_classes(
            self.logits(x), y, check_num_data(num_data, "KerasCNN.forward") or self.num_data
        )
