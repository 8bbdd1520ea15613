r"""Draws folded into the batch: how a converted network runs a user's forward, written for one
batch, on weights batched over draws.

Under ``S`` draws (vectorised particles, or a chunk of ``predict``) each weight has leading draw
dims ``D`` (``prod(D) = S``). The converted model repeats its input ``[N, ...]`` into one batch
``[S·N, ...]`` (draw-major: rows ``s·N .. s·N + N - 1`` belong to draw ``s``) and runs the user's
forward on it: every line of that forward sees a batch of the shape it was written for, so
``x.view(x.size(0), -1)``, ``log_softmax(dim=1)``, ``torch.cat(..., 1)`` and batch norm in eval
mode mean what they meant. Only the Bayesian layers know about the draws: each unfolds its input
to ``[*D, N, ...]``, applies every draw's weights to that draw's rows, and folds the output back.
The result for row ``n`` of draw ``s`` is the network's output at ``x_n`` with draw ``s``'s weights,
exactly, for any forward that treats the rows of a batch separately (the converted model checks
that once per input shape, :mod:`pyro_dropout.nn.converted.model`).
"""

from __future__ import annotations

import contextvars
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from ..conv import Conv1d, Conv2d, Conv3d
from ..functional import conv, linear, strip_plate_slots, take_mask, unexpand
from ..layers import Linear
from ..masking import input_mask_for
from ..recurrent import GRU, LSTM

__all__ = [
    "Fold",
    "FoldError",
    "FoldedConv1d",
    "FoldedConv2d",
    "FoldedConv3d",
    "FoldedGRU",
    "FoldedLSTM",
    "FoldedLinear",
    "current_fold",
    "folding",
]


class FoldError(RuntimeError):
    """A Bayesian layer met an input that is not a folded batch (the forward moved the batch
    axis): the converted model then runs the draws one at a time."""


@dataclass(frozen=True)
class Fold:
    """The draws folded into the batch: their shape ``D`` and the rows ``N`` of one draw."""

    draws: torch.Size
    rows: int

    @property
    def size(self) -> int:
        return math.prod(self.draws)

    def is_folded(self, x: torch.Tensor, dim: int = 0) -> bool:
        """Whether ``x`` holds every draw's rows (``S·N`` on ``dim``), not yet one batch of ``N``
        (what the layers before the first stochastic one compute, once for all draws)."""
        if x.dim() > dim and x.shape[dim] == self.rows and self.size > 1:
            return False
        return True

    def repeat(self, x: torch.Tensor, dim: int = 0) -> torch.Tensor:
        """A batch of ``N`` (the same for every draw) as the folded batch of ``S·N``."""
        if self.is_folded(x, dim):
            return x
        x = x.movedim(dim, 0)
        return x.expand(self.size, *x.shape).reshape(self.size * self.rows, *x.shape[1:]).movedim(0, dim)

    def unfold(self, x: torch.Tensor, where: str, dim: int = 0) -> torch.Tensor:
        """``x`` with its batch axis ``dim`` (``S·N`` rows) split into ``[*D, N]`` leading dims."""
        x = self.repeat(x, dim) if x.dim() > dim else x
        if x.dim() <= dim or x.shape[dim] != self.size * self.rows:
            raise FoldError(
                f"{where}: expected the folded batch of {self.size} draws x {self.rows} rows on dim {dim}, "
                f"got an input of shape {tuple(x.shape)}"
            )
        x = x.movedim(dim, 0)
        return x.reshape(*self.draws, self.rows, *x.shape[1:])

    def fold(self, y: torch.Tensor, dim: int = 0) -> torch.Tensor:
        """The inverse of :meth:`unfold`: ``[*D, N, ...]`` back to a batch of ``S·N`` on ``dim``."""
        lead = len(self.draws)
        y = y.reshape(self.size * self.rows, *y.shape[lead + 1 :])
        return y.movedim(0, dim)


_FOLD: contextvars.ContextVar[Fold | None] = contextvars.ContextVar("pyro_dropout_fold", default=None)


def current_fold() -> Fold | None:
    """The fold of the running converted model's forward, if its draws are folded."""
    return _FOLD.get()


@contextmanager
def folding(fold: Fold | None) -> Iterator[None]:
    token = _FOLD.set(fold)
    try:
        yield
    finally:
        _FOLD.reset(token)


def _draw_major(t: Any, fold: Fold, core: int) -> Any:
    """A weight or bias (``None``: none) with its plate slots dropped and leading ones for the draw
    dims ``D`` it lacks."""
    if t is None:
        return None
    t = strip_plate_slots(t, core)
    lead = t.dim() - core
    if lead > len(fold.draws):
        raise FoldError(
            f"a weight of shape {tuple(t.shape)} has more draw dims than the fold {tuple(fold.draws)}"
        )
    return t.reshape((1,) * (len(fold.draws) - lead) + t.shape)


def _varies(t: Any, core: int) -> bool:
    """Whether a weight (or bias) differs between draws (not a point mass expanded over them)."""
    return t is not None and (
        input_mask_for(t) is not None or strip_plate_slots(unexpand(t, core), core).dim() > core
    )


def _once(fold: Fold | None, x: torch.Tensor, layer: Any, core: int) -> bool:
    """Whether ``layer`` runs as it is: no draws, or an input not folded yet and weights the same
    for every draw (computed once; the draws fold in at the first layer that differs)."""
    if fold is None:
        return True
    if fold.is_folded(x):
        return False
    return not _varies(layer.declared_weight(), core) and not _varies(layer.declared_bias(), 1)


def _refuse_shared_positions(layer: Linear, x: torch.Tensor) -> None:
    """With ``masks="shared"``: a network's dropout that became this layer's weight mask masks one
    input unit for all the positions of a row (``[N, T, in]``: tokens, time steps, pixels), where
    the network's own dropout masks every element: refuse it, naming the layer."""
    if not layer.dropout or layer.network_masks or x.dim() <= 2:  # the batch (draws folded in), units
        return
    if input_mask_for(layer.declared_weight()) is not None:  # masked per example (and position)
        return
    raise ValueError(
        f"from_module(masks='shared'): the dropout before the layer '{layer._pyro_name}' masks its "
        f"inputs, which are [N, positions..., {x.shape[-1]}] (shape {tuple(x.shape)}: tokens, time "
        "steps or pixels); one mask per input unit shared by a draw would be shared over the positions "
        "too, where the network's own dropout masks every element: convert with masks='own' (the "
        "default)"
    )


class FoldedLinear(Linear):
    """The library's ``Linear`` inside a converted network: takes the folded batch."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        fold = current_fold()
        _refuse_shared_positions(self, x)
        if fold is None or _once(fold, x, self, 2):
            return super().forward(x)
        xs = fold.unfold(x, "a converted Linear")  # [*D, N, *mid, in]
        keep, weight = take_mask(self.declared_weight(), xs)  # a per-example mask, taken once
        if keep is not None:
            xs = xs * keep
        rows = xs.reshape(*fold.draws, -1, xs.shape[-1])  # [*D, N·mid, in]
        w, b = _draw_major(weight, fold, 2), _draw_major(self.declared_bias(), fold, 1)
        out = linear(rows, w, b)
        return fold.fold(out.reshape(*xs.shape[:-1], out.shape[-1]))


class _FoldedConv:
    """A convolution of the library inside a converted network: takes the folded batch."""

    dims: int

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        layer: Callable = super().forward  # type: ignore[misc]
        fold = current_fold()
        if fold is None or _once(fold, x, self, self.dims + 2):
            return layer(x)
        xs = fold.unfold(x, f"a converted Conv{self.dims}d")  # [*D, N, C, *space]
        keep, weight = take_mask(self.declared_weight(), xs)  # type: ignore[attr-defined]
        if keep is not None:
            xs = xs * keep
        core = self.dims + 2
        w = _draw_major(weight, fold, core)
        b = _draw_major(self.declared_bias(), fold, 1)  # type: ignore[attr-defined]
        s = self  # the layer's settings
        out = conv(self.dims, xs, w, b, s.stride, s.padding, s.dilation, s.groups)  # type: ignore[attr-defined]
        return fold.fold(out)


class FoldedConv1d(_FoldedConv, Conv1d):
    """``Conv1d`` of a converted network."""


class FoldedConv2d(_FoldedConv, Conv2d):
    """``Conv2d`` of a converted network."""


class FoldedConv3d(_FoldedConv, Conv3d):
    """``Conv3d`` of a converted network."""


class _FoldedRecurrent:
    """A recurrent layer of the library inside a converted network: the folded batch is on dim 0
    (``batch_first``) or 1, and so is the batch of its state ``[layers, S·N, H]``."""

    batch_first: bool

    def forward(self, x: torch.Tensor, state: tuple[torch.Tensor, ...] | torch.Tensor | None = None) -> tuple:
        layer: Callable = super().forward  # type: ignore[misc]
        single = isinstance(state, torch.Tensor)  # torch's GRU takes h0 alone
        states = (state,) if isinstance(state, torch.Tensor) else state
        fold = current_fold()
        if fold is None:
            out, final = layer(x, states)
            return out, final[0] if single or len(final) == 1 else final
        lead = len(fold.draws)
        xs = fold.unfold(x, f"a converted {type(self).__name__}", 0 if self.batch_first else 1)
        if not self.batch_first:  # [*D, N, T, in] -> [*D, T, N, in]
            xs = xs.movedim(lead, lead + 1)
        start = (
            None
            if states is None
            else tuple(fold.unfold(s, "a recurrent state", 1).movedim(lead, lead + 1) for s in states)
        )
        out, final = layer(xs, start)
        if not self.batch_first:
            out = out.movedim(lead + 1, lead)
        out = fold.fold(out, 0 if self.batch_first else 1)
        final = tuple(fold.fold(f.movedim(lead + 1, lead), 1) for f in final)
        return out, final[0] if single or len(final) == 1 else final


class FoldedLSTM(_FoldedRecurrent, LSTM):
    """``LSTM`` of a converted network (the output ``(out, (h, c))``, as torch's)."""


class FoldedGRU(_FoldedRecurrent, GRU):
    """``GRU`` of a converted network (the output ``(out, h)``, as torch's)."""
