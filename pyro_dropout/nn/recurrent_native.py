r"""The library's recurrent layers on torch's fused LSTM and GRU kernels, where that is the same pass.

Where every weight and bias of a layer is one tensor (one draw: no leading draw dims) and no
per-example mask is pending, the layer's pass is torch's ``nn.LSTM`` / ``nn.GRU`` with those
tensors (through :func:`torch.func.functional_call` on a template module): the same arithmetic,
its time steps in one fused kernel instead of a Python loop. The library's LSTM has one bias per
gate (the sum of torch's two); torch's recurrent bias is then zero. Inter-layer dropout, where the
layer draws it per step (``step_dropout``, a converted network's own), is torch's own too.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.func import functional_call

from .masking import input_mask_for

__all__ = ["native_pass"]

_TEMPLATE = "_native_template"


def _tensors(layer: Any) -> dict[str, torch.Tensor] | None:
    """torch's parameters of ``layer`` from its sampled weights; None where a weight has draw
    dims, a per-example mask is pending, or a bias is absent."""
    found: dict[str, torch.Tensor] = {}
    for k, cell in enumerate(layer.layers):
        w_ih, w_hh = cell.ih.declared_weight(), cell.hh.declared_weight()
        b_ih, b_hh = cell.ih.declared_bias(), cell.hh.declared_bias()
        if any(w.dim() != 2 or input_mask_for(w) is not None for w in (w_ih, w_hh)) or b_ih is None:
            return None
        if b_ih.dim() != 1 or (b_hh is not None and b_hh.dim() != 1):
            return None
        found |= {f"weight_ih_l{k}": w_ih, f"weight_hh_l{k}": w_hh, f"bias_ih_l{k}": b_ih}
        found[f"bias_hh_l{k}"] = b_hh if b_hh is not None else torch.zeros_like(b_ih)
    return found


def _template(layer: Any) -> nn.RNNBase:
    """A torch module of the layer's sizes (kept out of the module tree: its values are given)."""
    kind = nn.LSTM if layer.parts == 2 else nn.GRU
    if _TEMPLATE not in layer.__dict__:
        layer.__dict__[_TEMPLATE] = kind(
            layer.input_size, layer.hidden_size, layer.num_layers, batch_first=True
        )
    template = layer.__dict__[_TEMPLATE]
    template.dropout = float(layer.step_dropout)
    template.train(layer.training)
    return template


def native_pass(layer: Any, h: torch.Tensor, state: tuple[torch.Tensor, ...] | None) -> tuple | None:
    """``(output [N, T, H], final state parts)`` of ``layer`` on batch-first inputs ``h``
    ``[N, T, in]`` by torch's kernel; None where the pass is not that (see the module's docs)."""
    if h.dim() != 3 or any(s.dim() != 3 for s in state or ()):
        return None
    params = _tensors(layer)
    if params is None or any(t.dtype != h.dtype or t.device != h.device for t in params.values()):
        return None
    hx: Any = None if state is None else (state if layer.parts == 2 else state[0])
    out, final = functional_call(_template(layer), params, (h, hx))
    return out, (tuple(final) if layer.parts == 2 else (final,))
