"""Ready-made MLP classifiers of the papers' image experiments (LeNet is in :mod:`.lenet`).

Both are :class:`~pyro_dropout.nn.MLP` with a categorical likelihood, so their weights are sample
sites that broadcast over draws; the rates are the guide's (``DropoutGuide(model, dropout=0.5)``
for MC dropout, ``concrete=True`` to learn them).
"""

from __future__ import annotations

import math

from ..ops import is_positive_int, is_positive_number
from .models import MLP

__all__ = ["concrete_mlp", "small_mlp"]


def _check(name: str, **sizes: int) -> None:
    for arg, value in sizes.items():
        if not is_positive_int(value):
            raise ValueError(f"{name}: {arg} must be a positive integer, got {value!r}")


def concrete_mlp(
    width: int = 512, depth: int = 3, *, in_features: int = 784, classes: int = 10, length_scale: float = 1e-2
) -> MLP:
    """The MLP of paper 001 §4.3 (Concrete dropout on MNIST): ``depth`` hidden ReLU layers of
    ``width`` units; the prior length-scale of a layer with ``K`` inputs is ``length_scale * sqrt(K)``
    (appendix D.1: ``l = 1e-2``), so that the prior does not grow stronger with the fan-in.
    Paper 001 trains it with Concrete masks on every weight layer, the input included."""
    _check("concrete_mlp", width=width, depth=depth, in_features=in_features, classes=classes)
    if not is_positive_number(length_scale):
        raise ValueError(f"concrete_mlp: length_scale must be a positive number, got {length_scale!r}")
    fan_in = [in_features] + [width] * depth
    scales = [length_scale * math.sqrt(k) for k in fan_in]
    return MLP(in_features, classes, hidden=(width,) * depth, likelihood="categorical", length_scale=scales)


def small_mlp(
    width: int = 100,
    depth: int = 2,
    *,
    in_features: int = 784,
    classes: int = 10,
    length_scale: float = math.sqrt(0.1),
) -> MLP:
    """The 2×100 MLP of paper 003 §5.2 (BB-α on MNIST): ``depth`` hidden ReLU layers of ``width``
    units, prior length-scale ``l`` with ``l² = 0.1`` (the paper's weight decay 1e-6). Paper 003
    trains it with p = 0.5."""
    _check("small_mlp", width=width, depth=depth, in_features=in_features, classes=classes)
    return MLP(
        in_features, classes, hidden=(width,) * depth, likelihood="categorical", length_scale=length_scale
    )
