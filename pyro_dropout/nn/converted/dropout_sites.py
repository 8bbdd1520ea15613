r"""A network's own dropout where no weight can carry it: a mask that is a sample site.

With ``from_module(masks="shared")``, a dropout whose units are the input units of the next weight
layer (``nn.Dropout`` before an ``nn.Linear``, ``nn.Dropout2d`` before an ``nn.Conv2d``) is that
layer's variational family, :math:`W = M\,\mathrm{diag}(z)/(1-p)`. Any other dropout (a channel
dropout before a flatten and a linear layer, a dropout before ``tanh``, a trailing dropout, one
whose output goes two ways) is kept where the network has it, as the mask site ``<module>.mask``:
``z ~ Bernoulli(1 - p)`` over the units the module drops (every element of a row for
``nn.Dropout``, whole channels for ``Dropout1d/2d/3d``), applied as ``x · z / (1 - p)``. One mask
per function draw, shared by the rows of a batch, as a draw of the network is one function; its
input must hold the batch on dim 0. Its guide is its prior
(:class:`~pyro_dropout.guides.DropoutGuide` samples a site marked ``module_dropout`` from the
model's distribution), so its KL is 0: each point's predictive is that of the module's dropout.
"""

from __future__ import annotations

from typing import Any

import pyro.distributions as dist
import torch
from pyro import poutine
from pyro.nn import PyroModule, PyroSample

from ..functional import strip_plate_slots
from .fold import current_fold
from .loop import batch_rows, current_draw

__all__ = ["ModuleDropout"]


class ModuleDropout(PyroModule):
    """Dropout with drop probability ``p`` on every element (``channels=False``) or on whole
    channels (``channels=True``: dim 1 of ``[N, C, *space]``) of each row's input."""

    def __init__(self, p: float, channels: bool, name: str) -> None:
        super().__init__()
        if not 0.0 < p < 1.0:
            raise ValueError(f"from_module: the dropout '{name}' has p = {p}; expected 0 < p < 1")
        self.p, self.channels, self.origin = float(p), bool(channels), name
        self.unit_shape: tuple[int, ...] = ()
        self.unit_device = torch.device("cpu")  # the input's, set at each call: the mask is drawn there
        self.mask: Any = PyroSample(type(self)._prior)  # type: ignore[arg-type]

    def _prior(self) -> Any:
        keep = torch.full(self.unit_shape, 1.0 - self.p, device=self.unit_device)
        return dist.Bernoulli(keep).to_event(len(self.unit_shape))

    def _units(self, row: torch.Size) -> tuple[int, ...]:
        if not self.channels:
            return tuple(row)
        if len(row) < 2:
            raise ValueError(
                f"from_module: the channel dropout '{self.origin}' expects inputs [N, C, *space], got a row "
                f"of shape {tuple(row)}"
            )
        return (row[0],) + (1,) * (len(row) - 1)

    def _check_batch_first(self, x: torch.Tensor) -> None:
        """A mask shared by a draw's rows is one per row of dim 0: refuse an input whose dim 0 is
        not the batch (a time-first ``[T, N, ...]`` layout), whose mask would be shared over time."""
        rows, fold = batch_rows(), current_fold()
        batches = {rows} if rows is not None else set()
        if fold is not None:
            batches |= {fold.rows, fold.rows * fold.size}
        if batches and (x.dim() == 0 or x.shape[0] not in batches):
            raise ValueError(
                f"from_module(masks='shared'): the dropout '{self.origin}' sees an input of shape "
                f"{tuple(x.shape)} whose dim 0 is not the batch of {rows} rows (a time-first layout); "
                "a mask shared by the rows of a draw would then be shared over time steps, which the "
                "network's dropout is not: convert with masks='own' (the default)"
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self._check_batch_first(x)
        fold = current_fold()
        self.unit_shape, self.unit_device = self._units(x.shape[1:]), x.device
        core = len(self.unit_shape)
        config: Any = lambda msg: {"module_dropout": self.p} if msg["type"] == "sample" else {}  # noqa: E731
        with poutine.infer_config(config_fn=config):
            z = strip_plate_slots(self.mask, core).to(x.dtype)
        scale = z / (1.0 - self.p)
        draw = current_draw()
        if draw is not None:  # one draw at a time: this draw's mask
            scale = scale.reshape(-1, *self.unit_shape)[draw.index] if scale.dim() > core else scale
            return x * scale
        if fold is None or scale.dim() == core:
            return x * scale
        xs = fold.unfold(x, f"the dropout '{self.origin}'")  # [*D, N, *row]
        draws = scale.shape[: scale.dim() - core]
        scale = scale.reshape((1,) * (len(fold.draws) - len(draws)) + draws + (1,) + self.unit_shape)
        return fold.fold(xs * scale)

    def extra_repr(self) -> str:
        return f"p={self.p}, channels={self.channels} (was '{self.origin}')"
