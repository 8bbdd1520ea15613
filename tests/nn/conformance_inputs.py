"""The conformance battery's networks of several inputs, given as their forward takes them: a tuple
of positional inputs, a dict of keyword inputs (a padded batch with its ``attention_mask``), a
graph's ``(x, edge_index)``; and recurrent layers torch runs its own way (bidirectional, projected).

The network's own MC dropout here is ``draws`` separate passes (its dropout on, batch norm on its
running statistics): for a graph, whose nodes are joined by its edges, no other definition holds.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from . import conformance
from . import conformance_vision as vis


def noise(f: torch.Tensor) -> Any:
    """A diffusion U-Net's likelihood: its outputs are the noise's mean, unit variance."""
    import pyro.distributions as dist

    return dist.Normal(f, 1.0).to_event(1)


@dataclass
class InputsCase:
    make: Callable[[], nn.Module]
    inputs: Callable[[], Any]  # a tuple (positional) or a dict (keyword), or one tensor
    task: Any  # a task name or a likelihood
    site: str
    needs: str | None = None  # an optional package the case imports
    shared: tuple[str, ...] = ()


class TimeUNet(nn.Module):
    """A diffusion U-Net's shape: ``forward(x, t)``, a sinusoidal embedding of the timestep added to
    the features, channel dropout in the down path and dropout in the time MLP."""

    def __init__(self) -> None:
        super().__init__()
        self.time = nn.Sequential(nn.Linear(8, 16), nn.SiLU(), nn.Dropout(0.1), nn.Linear(16, 8))
        self.down = nn.Conv2d(1, 8, 3, padding=1)
        self.mid = nn.Conv2d(8, 8, 3, stride=2, padding=1)
        self.drop = nn.Dropout2d(0.2)
        self.up = nn.ConvTranspose2d(8, 8, 2, stride=2)
        self.out = nn.Conv2d(16, 1, 3, padding=1)

    def embed(self, t: torch.Tensor) -> torch.Tensor:
        freqs = torch.exp(-math.log(1000.0) * torch.arange(4, dtype=torch.float32) / 4)
        angles = t.float().reshape(-1, 1) * freqs
        return self.time(torch.cat([angles.sin(), angles.cos()], -1))

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        h = F.silu(self.down(x)) + self.embed(t)[:, :, None, None]
        m = self.drop(F.silu(self.mid(h)))
        return self.out(torch.cat([h, self.up(m)], 1)).flatten(1)


def _propagate(h: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
    """A node's features plus the mean of its in-neighbours' (a GCN's step, in plain torch)."""
    source, target = edge_index
    total = torch.zeros_like(h).index_add_(0, target, h[source])
    count = torch.zeros(h.shape[0], dtype=h.dtype).index_add_(
        0, target, torch.ones_like(target, dtype=h.dtype)
    )
    return h + total / count.clamp_min(1).unsqueeze(-1)


class PlainGCN(nn.Module):
    """A graph network written in plain torch: ``forward(x, edge_index)``, node-level logits."""

    def __init__(self) -> None:
        super().__init__()
        self.l1, self.l2 = nn.Linear(4, 16), nn.Linear(16, 3)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        h = F.relu(_propagate(self.l1(F.dropout(x, 0.3, self.training)), edge_index))
        return _propagate(self.l2(F.dropout(h, 0.5, self.training)), edge_index)


class PygNet(nn.Module):
    """torch_geometric's GCN or GAT (attention dropout inside), as its examples write them."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        import torch_geometric.nn as gnn

        if kind == "gat":
            self.c1, self.c2 = gnn.GATConv(4, 8, heads=2, dropout=0.4), gnn.GATConv(16, 3, dropout=0.4)
        else:
            self.c1, self.c2 = gnn.GCNConv(4, 16), gnn.GCNConv(16, 3)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        h = F.elu(self.c1(F.dropout(x, 0.5, self.training), edge_index))
        return self.c2(F.dropout(h, 0.5, self.training), edge_index)


class Tagger(nn.Module):
    """A bidirectional (or projected) two-layer LSTM tagger: a class per token."""

    def __init__(self, **lstm: Any) -> None:
        super().__init__()
        self.embed = nn.Embedding(20, 8)
        self.lstm = nn.LSTM(8, 8, num_layers=2, batch_first=True, dropout=0.3, **lstm)
        width = 16 if lstm.get("bidirectional") else lstm.get("proj_size") or 8
        self.drop, self.out = nn.Dropout(0.2), nn.Linear(width, 5)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.out(self.drop(self.lstm(self.embed(tokens))[0]))


def _graph() -> tuple[torch.Tensor, torch.Tensor]:
    ring = torch.arange(7)
    edges = torch.stack([torch.cat([ring, (ring + 1) % 7]), torch.cat([(ring + 1) % 7, ring])])
    return torch.randn(7, 4), edges


def _padded(vocab: int) -> dict[str, torch.Tensor]:
    """A padded batch: rows of 8, 5 and 3 tokens, id 0 after their ends, and the attention mask."""
    lengths = torch.tensor([8, 5, 3])
    mask = (torch.arange(8) < lengths[:, None]).long()
    return {"input_ids": torch.randint(1, vocab, (3, 8)) * mask, "attention_mask": mask}


def _hf(kind: str) -> nn.Module:
    if kind == "bert":  # the main battery's tiny BERT
        return conformance._hf("bert")
    import transformers as hf

    config = hf.T5Config(
        vocab_size=30, d_model=16, d_kv=8, d_ff=32, num_layers=2, num_heads=2, decoder_start_token_id=0
    )
    return hf.T5ForConditionalGeneration(config)


def _t5_inputs() -> dict[str, torch.Tensor]:
    return {"input_ids": torch.randint(1, 30, (3, 6)), "decoder_input_ids": torch.randint(1, 30, (3, 4))}


def cases() -> dict[str, InputsCase]:
    tabular = vis.Tabular

    def tabular_tuple() -> tuple[torch.Tensor, torch.Tensor]:
        return torch.randn(4, 3), torch.randint(0, 6, (4,))

    def tabular_dict() -> dict[str, torch.Tensor]:
        numbers, category = tabular_tuple()
        return {"category": category, "numbers": numbers}

    return {
        "tabular-tuple": InputsCase(tabular, tabular_tuple, "regression", "mean"),
        "tabular-dict": InputsCase(tabular, tabular_dict, "regression", "mean"),
        "diffusion-unet-x-t": InputsCase(
            TimeUNet, lambda: (torch.randn(3, 1, 8, 8), torch.tensor([3.0, 40.0, 700.0])), noise, "output"
        ),
        "diffusion-unet-one-t": InputsCase(
            TimeUNet, lambda: (torch.randn(3, 1, 8, 8), torch.tensor(250.0)), noise, "output"
        ),
        "gcn-plain-torch": InputsCase(PlainGCN, _graph, "classification", "logits"),
        "bilstm-tagger": InputsCase(
            lambda: Tagger(bidirectional=True),
            lambda: torch.randint(0, 20, (3, 6)),
            "classification",
            "logits",
        ),
        "projected-lstm-tagger": InputsCase(
            lambda: Tagger(proj_size=4), lambda: torch.randint(0, 20, (3, 6)), "classification", "logits"
        ),
        "hf-bert-padded": InputsCase(
            lambda: _hf("bert"), lambda: _padded(40), "classification", "logits", "transformers"
        ),
        "hf-t5-two-inputs": InputsCase(
            lambda: _hf("t5"), _t5_inputs, "classification", "logits", "transformers"
        ),
        "pyg-gcn": InputsCase(lambda: PygNet("gcn"), _graph, "classification", "logits", "torch_geometric"),
        "pyg-gat": InputsCase(lambda: PygNet("gat"), _graph, "classification", "logits", "torch_geometric"),
    }


def call(net: nn.Module, inputs: Any) -> Any:
    if isinstance(inputs, dict):
        return net(**inputs)
    return net(*inputs) if isinstance(inputs, tuple) else net(inputs)


def _output(out: Any) -> torch.Tensor:
    return out if isinstance(out, torch.Tensor) else out.logits


def own_passes(net: nn.Module, inputs: Any, draws: int) -> torch.Tensor:
    """The network's own MC dropout: ``draws`` passes, its dropout on, batch norm on its statistics."""
    net = copy.deepcopy(net).train()
    for module in net.modules():
        if isinstance(module, nn.modules.batchnorm._BatchNorm):
            module.eval()
    with torch.no_grad():
        return torch.stack([_output(call(net, inputs)) for _ in range(draws)])


def eval_pass(net: nn.Module, inputs: Any) -> torch.Tensor:
    with torch.no_grad():
        return _output(call(copy.deepcopy(net).eval(), inputs))
