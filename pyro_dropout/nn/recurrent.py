r"""Recurrent layers with variational dropout (Gal & Ghahramani, 2016, "A theoretically grounded
application of dropout in recurrent neural networks"): their weights are sample sites.

Each layer holds an input weight :math:`W_{ih}` ``[G·H, in]`` and a recurrent weight
:math:`W_{hh}` ``[G·H, H]`` (``G`` = 4 gates for the LSTM, 3 for the GRU) as
:class:`~pyro_dropout.nn.Linear` sites. :class:`~pyro_dropout.guides.DropoutGuide` masks their
input units, so a draw drops input units and hidden units; the weight is drawn **once per
sequence and applied at every time step**, so the masks are tied over time, as the view of
dropout as approximate inference in a deep Gaussian process requires (paper 004). Under
per-example masks (``DropoutELBO(per_example_masks=True)``) each sequence gets its own masks,
still one per sequence (:func:`~pyro_dropout.nn.functional.take_mask`). The analytic KL counts
each weight once, however long the sequences.

Inputs ``[T, N, in]`` (``batch_first=True``: ``[N, T, in]``) with optional leading draw dims,
as ``torch.nn.LSTM``'s. Usage:

    class Forecaster(PyroModule):
        def __init__(self):
            super().__init__()
            self.lstm = LSTM(1, 32, batch_first=True, dropout=0.1)
            self.head = Linear(32, 1, dropout=0.1)

        def forward(self, x, y=None):
            out, _ = self.lstm(x)                       # [..., N, T, 32]
            mean = self.head(out[..., -1, :]).squeeze(-1)
            ...
"""

from __future__ import annotations

from typing import cast

import torch
import torch.nn.functional as F
from pyro.nn import PyroModule, PyroModuleList

from ..ops import is_positive_int
from .functional import linear, take_mask
from .layers import LengthScale, Linear
from .recurrent_native import native_pass

__all__ = ["GRU", "LSTM"]

State = tuple[torch.Tensor, ...]


class _Cell(PyroModule):
    """One layer: the input and the recurrent weight of ``gates`` gates of ``hidden`` units."""

    def __init__(
        self,
        size: int,
        hidden: int,
        gates: int,
        bias: bool,
        hh_bias: bool,
        scale: LengthScale,
        p: float | None,
    ) -> None:
        super().__init__()
        self.ih = Linear(size, gates * hidden, bias=bias, length_scale=scale, dropout=p)
        self.hh = Linear(hidden, gates * hidden, bias=bias and hh_bias, length_scale=scale, dropout=p)

    def inputs(self, x: torch.Tensor) -> torch.Tensor:
        """The input weight's part of every gate at every step: ``[..., N, T, G·H]``."""
        keep, weight = take_mask(self.ih.declared_weight(), x.select(-2, 0))
        if keep is not None:
            x = x * keep.unsqueeze(-2)  # one mask per sequence, the same at every step
        n, steps = x.shape[-3], x.shape[-2]
        out = linear(x.reshape(*x.shape[:-3], n * steps, x.shape[-1]), weight, self.ih.declared_bias())
        return out.reshape(*out.shape[:-2], n, steps, out.shape[-1])

    def recurrent(self, h: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor, torch.Tensor | None]:
        """The recurrent weight (its per-sequence mask, if any, taken once) and bias."""
        keep, weight = take_mask(self.hh.declared_weight(), h)
        return keep, weight, self.hh.declared_bias()


class _Recurrent(PyroModule):
    """A stack of :class:`_Cell` run over time; a subclass sets ``gates`` per unit, ``hh_bias``
    (whether the recurrent weight has a bias of its own), ``parts`` (tensors in its state) and
    ``step``, the update of one time step."""

    gates: int
    hh_bias: bool
    parts: int
    # torch's inter-layer dropout: a new mask for every element of each layer's outputs but the
    # last, at every step (a converted nn.LSTM's, masks="own"); 0: the masks are the weights'
    step_dropout = 0.0

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        *,
        bias: bool = True,
        batch_first: bool = False,
        length_scale: LengthScale = 1.0,
        dropout: float | None = None,
    ) -> None:
        super().__init__()
        what = type(self).__name__
        for name, value in (
            ("input_size", input_size),
            ("hidden_size", hidden_size),
            ("num_layers", num_layers),
        ):
            if not is_positive_int(value):
                raise ValueError(f"{what}: {name} must be a positive int, got {value!r}")
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.batch_first = bool(batch_first)
        sizes = [input_size] + [hidden_size] * (num_layers - 1)
        self.layers = PyroModuleList(
            [_Cell(k, hidden_size, self.gates, bias, self.hh_bias, length_scale, dropout) for k in sizes]
        )

    def _start(self, x: torch.Tensor, state: State | None, layer: int) -> State:
        if state is None:
            return (x.new_zeros(x.shape[-3], self.hidden_size),) * self.parts
        return tuple(s[..., layer, :, :] for s in state)

    def step(self, gates: torch.Tensor, recurrent: torch.Tensor, state: State) -> State:
        raise NotImplementedError

    def forward(self, x: torch.Tensor, state: State | None = None) -> tuple[torch.Tensor, State]:
        """``(output, state)``: the last layer's hidden states at every step, ``[..., T, N, H]``
        (``batch_first``: ``[..., N, T, H]``), and each part of the final state (the LSTM's
        ``(h, c)``, the GRU's ``(h,)``) as ``[..., num_layers, N, H]``."""
        h = self._checked_inputs(x)
        state = self._checked_state(state, h)
        native = native_pass(self, h, state)  # one draw's weights: torch's fused kernel
        if native is not None:
            out, parts = native
            return (out if self.batch_first else out.transpose(-3, -2)), parts
        finals = []
        for layer, cell in enumerate(self.layers):
            if layer > 0 and self.step_dropout > 0:
                h = F.dropout(h, self.step_dropout, self.training)
            h, last = self._run(cast(_Cell, cell), h, self._start(h, state, layer))
            finals.append(last)
        out = h if self.batch_first else h.transpose(-3, -2)
        parts = tuple(torch.stack(torch.broadcast_tensors(*ps), dim=-3) for ps in zip(*finals, strict=True))
        return out, parts

    def _checked_inputs(self, x: object) -> torch.Tensor:
        """``x`` as ``[..., N, T, in]``; an error naming what is wrong otherwise."""
        what, order = type(self).__name__, "N, T" if self.batch_first else "T, N"
        if isinstance(x, torch.nn.utils.rnn.PackedSequence):
            raise TypeError(
                f"{what}: takes padded tensors [..., {order}, {self.input_size}], not a PackedSequence "
                "(torch.nn.utils.rnn.pad_packed_sequence gives one; masks are drawn per sequence)"
            )
        if not isinstance(x, torch.Tensor):
            raise TypeError(
                f"{what}: x must be a tensor [..., {order}, {self.input_size}], got {type(x).__name__}"
            )
        if x.dim() < 3 or x.shape[-1] != self.input_size:
            raise ValueError(
                f"{what}: expected inputs [..., {order}, {self.input_size}], got {tuple(x.shape)}"
            )
        h = x if self.batch_first else x.transpose(-3, -2)
        if h.shape[-2] == 0 or h.shape[-3] == 0:
            raise ValueError(f"{what}: inputs {tuple(x.shape)} hold no time steps or no sequences ({order})")
        return h

    def _checked_state(self, state: object, h: torch.Tensor) -> State | None:
        """``state`` as a tuple of ``parts`` tensors ``[..., num_layers, N, H]`` (the GRU's ``h0``
        also as a bare tensor, as ``torch.nn.GRU`` takes it)."""
        if state is None:
            return None
        what = type(self).__name__
        names = "(h, c)" if self.parts == 2 else "h (or (h,))"
        if isinstance(state, torch.Tensor) and self.parts == 1:
            state = (state,)
        if not isinstance(state, tuple | list) or len(state) != self.parts:
            got = f"a tuple of {len(state)}" if isinstance(state, tuple | list) else type(state).__name__
            raise ValueError(f"{what}: state must be {names}, got {got}")
        expected = (self.num_layers, h.shape[-3], self.hidden_size)
        for name, part in zip(("h", "c"), state, strict=False):
            if not isinstance(part, torch.Tensor) or part.dim() < 3 or tuple(part.shape[-3:]) != expected:
                shape = tuple(part.shape) if isinstance(part, torch.Tensor) else type(part).__name__
                raise ValueError(
                    f"{what}: state {name} must be [..., num_layers, N, hidden_size] = [..., "
                    f"{', '.join(map(str, expected))}], got {shape}"
                )
        return tuple(state)

    def _run(self, cell: _Cell, x: torch.Tensor, state: State) -> tuple[torch.Tensor, State]:
        gates = cell.inputs(x)
        keep, weight, bias = cell.recurrent(state[0])
        outputs = []
        for t in range(gates.shape[-2]):
            h = state[0] if keep is None else state[0] * keep
            state = self.step(gates[..., t, :], linear(h, weight, bias), state)
            outputs.append(state[0])
        return torch.stack(torch.broadcast_tensors(*outputs), dim=-2), state

    def extra_repr(self) -> str:
        sizes = f"{self.input_size}, {self.hidden_size}, num_layers={self.num_layers}"
        return f"{sizes}, batch_first={self.batch_first}"


class LSTM(_Recurrent):
    r"""A Bayesian ``nn.LSTM`` (gates i, f, g, o as PyTorch orders them); see the module's docs.

    :param dropout: the drop probability the layers declare for their input and recurrent weights
        (``None``: left to the guide).
    :param length_scale: the prior length-scale of every weight and bias.
    """

    gates, parts = 4, 2
    hh_bias = False  # the recurrent bias would add to the input's: one is enough

    def step(self, gates: torch.Tensor, recurrent: torch.Tensor, state: State) -> State:
        i, f, g, o = (gates + recurrent).chunk(4, dim=-1)
        c = torch.sigmoid(f) * state[1] + torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o) * torch.tanh(c), c


class GRU(_Recurrent):
    r"""A Bayesian ``nn.GRU`` (gates r, z, n as PyTorch orders them; the recurrent bias of the
    candidate inside the reset gate's product, as PyTorch's); see the module's docs."""

    gates, hh_bias, parts = 3, True, 1

    def step(self, gates: torch.Tensor, recurrent: torch.Tensor, state: State) -> State:
        r_x, z_x, n_x = gates.chunk(3, dim=-1)
        r_h, z_h, n_h = recurrent.chunk(3, dim=-1)
        r, z = torch.sigmoid(r_x + r_h), torch.sigmoid(z_x + z_h)
        n = torch.tanh(n_x + r * n_h)
        return ((1 - z) * n + z * state[0],)
