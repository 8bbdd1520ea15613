"""The recorder's graph clean-up (``infer/recorded/record.py``): identities bypassed, values kept."""

from __future__ import annotations

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from pyro_dropout.infer.recorded.record import fold_constants


def _chain(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    y = (x * 2).view(4, 6).view(2, 12).view(24)  # a view of a view of a view
    z = (x + 1).expand(4, 6).reshape(4, 6).detach()  # three identities
    return y, z


def _targets(gm: torch.fx.GraphModule) -> list:
    return [n.target for n in gm.graph.nodes if n.op == "call_function"]


def test_identities_are_bypassed_and_values_kept():
    x = torch.randn(4, 6)
    gm = fold_constants(make_fx(_chain)(x), detaches=True)
    aten = torch.ops.aten
    assert _targets(gm).count(aten.view.default) == 1
    assert not {aten.expand.default, aten.reshape.default, aten.detach.default} & set(_targets(gm))
    for got, expected in zip(gm(x), _chain(x), strict=True):
        assert got.shape == expected.shape and torch.equal(got, expected)


def test_detaches_are_kept_in_a_graph_with_gradients():
    def loss(w: torch.Tensor) -> torch.Tensor:
        return (w * w.detach()).sum()  # gradient w.detach(), not 2 w

    w = torch.randn(5, requires_grad=True)
    gm = fold_constants(make_fx(loss)(w))
    assert torch.ops.aten.detach.default in _targets(gm)
    (grad,) = torch.autograd.grad(gm(w), w)
    assert torch.allclose(grad, w.detach())
