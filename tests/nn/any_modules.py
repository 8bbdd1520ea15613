"""Networks written as people write them (pytorch/examples, tutorials, blog posts), each with an
input, the likelihood it is converted with, and the targets to train on."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class Case:
    net: nn.Module
    x: torch.Tensor
    y: torch.Tensor
    likelihood: Any
    output: str  # the output site the likelihood records
    options: dict = field(default_factory=dict)


def _classes(n: int, k: int) -> torch.Tensor:
    return torch.randint(0, k, (n,))


class MnistNet(nn.Module):
    """pytorch/examples' MNIST network, verbatim but for a smaller image."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, 1)
        self.conv2 = nn.Conv2d(8, 16, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(16 * 4 * 4, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = self.dropout2(x)
        return F.log_softmax(self.fc2(x), dim=1)


class Dropout2dCNN(nn.Module):
    """Channel dropout before a convolution (its input channels) and before a linear layer."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(1, 6, 3), nn.Conv2d(6, 8, 3)
        self.drop1, self.drop2 = nn.Dropout2d(0.2), nn.Dropout2d(0.3)
        self.fc = nn.Linear(8 * 2 * 2, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.drop1(F.relu(self.conv1(x)))
        h = F.max_pool2d(F.relu(self.conv2(h)), 2)
        return self.fc(self.drop2(h).view(h.size(0), -1))


class Conv1dNet(nn.Module):
    """Conv1d + BatchNorm1d with ``x.view(x.size(0), -1)``."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(2, 4, 3)
        self.bn = nn.BatchNorm1d(4)
        self.drop = nn.Dropout(0.2)
        self.fc = nn.Linear(4 * 8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.bn(self.conv(x)))
        return self.fc(self.drop(h.view(h.size(0), -1)))


class LSTMRegressor(nn.Module):
    def __init__(self, batch_first: bool = True, kind: type = nn.LSTM) -> None:
        super().__init__()
        self.batch_first = batch_first
        self.rnn = kind(3, 8, num_layers=2, dropout=0.25, batch_first=batch_first)
        self.head = nn.Linear(8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.rnn(x if self.batch_first else x.transpose(0, 1))
        last = out[:, -1] if self.batch_first else out[-1]
        return self.head(last)


class TextClassifier(nn.Module):
    """Embedding -> dropout -> LSTM -> linear."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(20, 6)
        self.drop = nn.Dropout(0.2)
        self.lstm = nn.LSTM(6, 8, batch_first=True)
        self.out = nn.Linear(8, 3)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        _, (h, _) = self.lstm(self.drop(self.embed(tokens)))
        return self.out(h[-1])


class TransformerClassifier(nn.Module):
    def __init__(self, dropout: float = 0.1) -> None:
        super().__init__()
        layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=dropout, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
        self.head = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(x).mean(dim=1))


class TwoHeads(nn.Module):
    """A heteroscedastic MC-dropout net: a mean head and a log-variance head."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Dropout(0.1))
        self.mean, self.log_var = nn.Linear(16, 1), nn.Linear(16, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.body(x)
        return torch.cat([self.mean(h), self.log_var(h)], dim=1)


def hooked() -> nn.Module:
    net = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Dropout(0.2), nn.Linear(8, 1))
    net[0].register_forward_hook(lambda module, args, out: out * 2.0 + 1.0)
    return net


class Tied(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.enc, self.dec = nn.Linear(4, 4), nn.Linear(4, 1)
        self.mid = nn.Linear(4, 4)
        self.mid.weight = self.enc.weight  # tied
        self.drop = nn.Dropout(0.2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dec(self.drop(torch.relu(self.mid(torch.relu(self.enc(x))))))


class Functional(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(3, 6), nn.Linear(6, 1)
        self.drop = nn.Dropout(0.2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(self.drop(torch.relu(F.linear(x, self.a.weight, self.a.bias))))


def _trained(net: nn.Module) -> nn.Module:
    """As if trained: batch norm's running statistics away from their start."""
    for module in net.modules():
        if isinstance(module, nn.modules.batchnorm._BatchNorm):
            module.running_mean.uniform_(-1, 1)
            module.running_var.uniform_(0.5, 2)
    return net.eval()


def cases() -> dict[str, Case]:
    """The networks that convert, each with its data."""
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(5, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 1))
    return {
        "mlp-batchnorm": Case(_trained(mlp), torch.randn(7, 5), torch.randn(7), "normal", "mean"),
        "cnn-dropout2d": Case(
            _trained(Dropout2dCNN()), torch.randn(6, 1, 8, 8), _classes(6, 4), "categorical", "logits"
        ),
        "conv1d-view": Case(_trained(Conv1dNet()), torch.randn(6, 2, 10), torch.randn(6), "normal", "mean"),
        "mnist-log-softmax": Case(
            _trained(MnistNet()), torch.randn(6, 1, 12, 12), _classes(6, 10), "categorical", "logits"
        ),
        "lstm": Case(_trained(LSTMRegressor()), torch.randn(5, 4, 3), torch.randn(5), "normal", "mean"),
        "gru-time-first": Case(
            _trained(LSTMRegressor(False, nn.GRU)), torch.randn(5, 4, 3), torch.randn(5), "normal", "mean"
        ),
        "embedding-lstm": Case(
            _trained(TextClassifier()), torch.randint(0, 20, (6, 5)), _classes(6, 3), "categorical", "logits"
        ),
        "transformer": Case(
            _trained(_attention_without_dropout()),
            torch.randn(5, 4, 8),
            _classes(5, 3),
            "categorical",
            "logits",
        ),
        "heteroscedastic": Case(
            _trained(TwoHeads()), torch.randn(7, 2), torch.randn(7), "heteroscedastic", "mean"
        ),
        "forward-hook": Case(_trained(hooked()), torch.randn(6, 3), torch.randn(6), "normal", "mean"),
        "tied-kept": Case(
            _trained(Tied()), torch.randn(6, 4), torch.randn(6), "normal", "mean", {"keep": ["enc", "mid"]}
        ),
        "functional-kept": Case(
            _trained(Functional()), torch.randn(6, 3), torch.randn(6), "normal", "mean", {"keep": ["a"]}
        ),
        "trailing-dropout": Case(
            _trained(nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 2), nn.Dropout(0.3))),
            torch.randn(6, 3),
            _classes(6, 2),
            "categorical",
            "logits",
        ),
    }


def _attention_without_dropout() -> nn.Module:
    """A transformer whose attention weights are not dropped (its feed-forward dropouts are)."""
    net = TransformerClassifier(dropout=0.2)
    for module in net.modules():
        if isinstance(module, nn.MultiheadAttention):
            module.dropout = 0.0
    return net


# networks refused at conversion, with the words the error must contain
REFUSED = {
    "transformer-attention-dropout": (lambda: TransformerClassifier(0.1), {"masks": "shared"}, "self_attn"),
    "tied": (Tied, {}, "share a weight"),
    "functional": (Functional, {}, "a.weight"),
    "alpha-dropout": (
        lambda: nn.Sequential(nn.Linear(3, 4), nn.SELU(), nn.AlphaDropout(0.1), nn.Linear(4, 1)),
        {"masks": "shared"},
        "AlphaDropout",
    ),
}
