r"""Per-example dropout masks: one mask per data point instead of one per function draw.

The dropout ELBO needs :math:`\sum_n \mathbb{E}_q \log p(y_n \mid x_n, W)`. One draw of
:math:`W` shared by a minibatch estimates it without bias, and so does a separate draw
:math:`W_n` for every data point :math:`n`, because each term involves one point only.
For a weight whose dropout masks its input units, :math:`x_n W_n^\top =
(x_n \odot z_n / (1-p))\, M^\top`: the per-example draw costs one mask per input row and
the same matrix product. The terms of a minibatch are then independent, so the
estimator has lower variance (the "local reparameterisation" argument of Kingma, Salimans
& Welling 2015, applied to dropout), and it is what Keras and PyTorch dropout layers do.

:class:`~pyro_dropout.infer.DropoutELBO` and :class:`~pyro_dropout.infer.BBAlpha` use
it with ``per_example_masks=True``: they replay the mean :math:`M` of every masked
weight into the model inside :func:`per_example_masks`, and
:func:`~pyro_dropout.nn.functional.linear` and :func:`~pyro_dropout.nn.functional.conv2d`
mask their inputs when they meet one of those weights. Each weight gets one mask per example: a
layer that applies a weight at several places (a recurrent weight, at every time step) takes the
mask once (:func:`~pyro_dropout.nn.functional.take_mask`, :meth:`InputMask.keep_mask`) and reuses
it, so a sequence keeps its masks over time. Prediction is unchanged: a posterior predictive
sample is one function, one mask for every input.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch

from ..distributions import MaskedWeight, mask_dim_for

__all__ = ["InputMask", "input_mask_for", "per_example_active", "per_example_masks"]


@dataclass
class InputMask:
    """A weight whose value is its mean, to be masked per example where it is used."""

    name: str
    family: MaskedWeight
    value: torch.Tensor  # the tensor the model receives (kept alive, so its id stays unique)
    uses: int = field(default=0)

    def mask_input(self, x: torch.Tensor, strip: Callable[[torch.Tensor, int], torch.Tensor]) -> torch.Tensor:
        r"""``x * keep / (1 - p)`` with one keep mask per example and input unit.

        :param x: the layer's input ``[..., N, *units]`` with ``event_dim`` core dims (``[N, in]``
            for a Linear weight, ``[N, C, H, W]`` for a conv weight).
        :param strip: the function that removes the plate slots of the weight's batch dims
            (:func:`~pyro_dropout.nn.functional.strip_plate_slots`), applied to ``p`` too.
        """
        return x * self.keep_mask(x, strip)

    def keep_mask(self, x: torch.Tensor, strip: Callable[[torch.Tensor, int], torch.Tensor]) -> torch.Tensor:
        r"""The mask :func:`mask_input` multiplies ``x`` by, ``keep / (1 - p)``, one per example and
        input unit, shaped to broadcast against ``x``: for a layer that applies the weight at
        several places with the *same* mask (a recurrent weight, at every time step of a
        sequence: :func:`~pyro_dropout.nn.functional.take_mask`). Each weight gets one mask:
        taking it counts as the weight's one use."""
        self.uses += 1
        if self.uses > 1:
            raise ValueError(
                f"site '{self.name}': with per-example masks a weight may enter the model once "
                "(a weight used twice would get two independent masks, a different model); a layer "
                "that reuses it (over time steps) takes its mask once with keep_mask"
            )
        q = self.family
        core = q.event_dim
        if q.mask_dim != mask_dim_for(core):
            raise ValueError(
                f"site '{self.name}': per-example masks drop a layer's input units; this weight declares "
                f"dropout_dim={q.mask_dim}, so it can only be masked per draw (per_example_masks=False)"
            )
        if x.dim() < core:
            raise ValueError(
                f"site '{self.name}': per-example masks need an input with {core} core dims "
                f"(examples, units...), got shape {tuple(x.shape)}"
            )
        value_batch = self.value.shape[: self.value.dim() - core]
        p = q.p_broadcast().expand(value_batch + (1,) * core)
        p = strip(p, core)
        batch = torch.broadcast_shapes(p.shape[: p.dim() - core], x.shape[: x.dim() - core])
        units = x.shape[x.dim() - core :]
        shape = batch + units[:2] + (1,) * (core - 2)
        return q.scaled_keep_with(torch.Size(shape), p)


_ACTIVE: list[dict[int, InputMask]] = []


@contextmanager
def per_example_masks(
    weights: Mapping[str, tuple[MaskedWeight, torch.Tensor]],
) -> Iterator[dict[int, InputMask]]:
    """Within this context, the given weight tensors are masked per example where used.

    :param weights: ``{site name: (family, value)}``; ``value`` is the tensor the model
        receives for the site (its mean ``M``, expanded to the draw's shape).
    :returns: (as the context value) the registry, to check afterwards that every weight
        was used (``InputMask.uses``).
    """
    registry = {id(value): InputMask(name, q, value) for name, (q, value) in weights.items()}
    _ACTIVE.append(registry)
    try:
        yield registry
    finally:
        _ACTIVE.pop()


def input_mask_for(weight: torch.Tensor) -> InputMask | None:
    """The pending per-example mask of ``weight``, if it is a registered weight."""
    if not _ACTIVE:
        return None
    found = _ACTIVE[-1].get(id(weight))
    return found if found is not None and found.value is weight else None


def per_example_active() -> bool:
    """Whether a loss is running the model with per-example masks (:func:`per_example_masks`)."""
    return bool(_ACTIVE)
