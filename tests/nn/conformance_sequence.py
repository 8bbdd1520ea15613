"""Token, sequence and attention networks of the conformance battery, written as their authors
write them (pytorch/examples' word language models, Kim's text CNN, an MLP-Mixer, a ViT)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


class TokenNet(nn.Module):
    """A per-token MLP, mean-pooled (the issue's toy): a dropout before a layer that sees tokens."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.drop, self.b = nn.Linear(8, 32), nn.Dropout(0.5), nn.Linear(32, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x [N, T, 8]
        return self.b(self.drop(torch.relu(self.a(x)))).mean(1)


class MixerBlock(nn.Module):
    def __init__(self, tokens: int, dim: int, p: float) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.tokens = nn.Sequential(nn.Linear(tokens, 16), nn.GELU(), nn.Dropout(p), nn.Linear(16, tokens))
        self.channels = nn.Sequential(nn.Linear(dim, 16), nn.GELU(), nn.Dropout(p), nn.Linear(16, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.tokens(self.norm1(x).transpose(1, 2)).transpose(1, 2)
        return x + self.channels(self.norm2(x))


class Mixer(nn.Module):
    """An MLP-Mixer on 8x8 images in 4x4 patches."""

    def __init__(self) -> None:
        super().__init__()
        self.patch = nn.Conv2d(1, 12, 4, stride=4)
        self.blocks = nn.Sequential(MixerBlock(4, 12, 0.2), MixerBlock(4, 12, 0.2))
        self.norm, self.head = nn.LayerNorm(12), nn.Linear(12, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.patch(x).flatten(2).transpose(1, 2)  # [N, patches, dim]
        return self.head(self.norm(self.blocks(h)).mean(dim=1))


class TextCNN(nn.Module):
    """Kim's CNN: embeddings, one dropout module on them and again before the classifier."""

    def __init__(self) -> None:
        super().__init__()
        self.embedding = nn.Embedding(30, 8)
        self.convs = nn.ModuleList([nn.Conv1d(8, 6, k) for k in (2, 3)])
        self.dropout = nn.Dropout(0.3)
        self.fc = nn.Linear(12, 2)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        e = self.dropout(self.embedding(tokens)).transpose(1, 2)  # [N, 8, T]
        pooled = [F.relu(conv(e)).max(dim=2).values for conv in self.convs]
        return self.fc(self.dropout(torch.cat(pooled, dim=1)))


class RNNModel(nn.Module):
    """pytorch/examples' word language model (batch-first input), with its ``init_hidden``."""

    def __init__(self, ntoken: int = 20, ninp: int = 8, nhid: int = 12, nlayers: int = 2) -> None:
        super().__init__()
        self.drop = nn.Dropout(0.3)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=0.3, batch_first=True)
        self.decoder = nn.Linear(nhid, ntoken)
        self.nlayers, self.nhid = nlayers, nhid

    def init_hidden(self, bsz: int) -> tuple[torch.Tensor, torch.Tensor]:
        weight = next(self.parameters())
        return weight.new_zeros(self.nlayers, bsz, self.nhid), weight.new_zeros(self.nlayers, bsz, self.nhid)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        emb = self.drop(self.encoder(tokens))
        output, _ = self.rnn(emb, self.init_hidden(tokens.size(0)))
        return self.decoder(self.drop(output))  # [N, T, ntoken]


class GRURegressor(nn.Module):
    """A two-layer GRU with torch's inter-layer dropout (a new mask at every step), time-first."""

    def __init__(self) -> None:
        super().__init__()
        self.rnn = nn.GRU(3, 10, num_layers=2, dropout=0.4)
        self.head = nn.Linear(10, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x [N, T, 3]
        out, _ = self.rnn(x.transpose(0, 1))
        return self.head(out[-1])


class TransformerClassifier(nn.Module):
    """nn.TransformerEncoder with its default-style dropout (attention weights included)."""

    def __init__(self) -> None:
        super().__init__()
        layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(x).mean(dim=1))


class PositionalEncoding(nn.Module):
    """pytorch/examples' positional encoding: time-first ``[T, N, D]``, with its dropout."""

    def __init__(self, d_model: int, dropout: float = 0.1, max_len: int = 64) -> None:
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe[:, 0::2], pe[:, 1::2] = torch.sin(position * div_term), torch.cos(position * div_term)
        self.register_buffer("pe", pe.unsqueeze(0).transpose(0, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(x + self.pe[: x.size(0), :])


class TransformerModel(nn.Module):
    """pytorch/examples' TransformerModel (time-first inside); given tokens [N, T] by a wrapper."""

    def __init__(self, ntoken: int = 20, ninp: int = 8) -> None:
        super().__init__()
        self.pos_encoder = PositionalEncoding(ninp, 0.2)
        layer = nn.TransformerEncoderLayer(ninp, 2, 16, 0.2)
        self.transformer_encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.input_emb = nn.Embedding(ntoken, ninp)
        self.decoder = nn.Linear(ninp, ntoken)
        self.ninp = ninp

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        src = self.input_emb(tokens.t()) * math.sqrt(self.ninp)  # [T, N, D]
        out = self.decoder(self.transformer_encoder(self.pos_encoder(src)))
        return F.log_softmax(out, dim=-1).transpose(0, 1)  # [N, T, ntoken]


class ViT(nn.Module):
    """A small vision transformer: patches, a class token, position embeddings with dropout."""

    def __init__(self) -> None:
        super().__init__()
        self.patch = nn.Conv2d(1, 8, 4, stride=4)
        self.cls = nn.Parameter(torch.randn(1, 1, 8) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, 5, 8) * 0.02)
        self.pos_drop = nn.Dropout(0.1)
        layer = nn.TransformerEncoderLayer(
            8, 2, 16, 0.1, activation="gelu", batch_first=True, norm_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Sequential(nn.LayerNorm(8), nn.Linear(8, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.patch(x).flatten(2).transpose(1, 2)
        h = torch.cat([self.cls.expand(h.shape[0], -1, -1), h], dim=1)
        return self.head(self.encoder(self.pos_drop(h + self.pos))[:, 0])


class SelfAttention(nn.Module):
    """Attention written by hand on ``F.scaled_dot_product_attention`` with its dropout_p."""

    def __init__(self, dim: int = 8, heads: int = 2, p: float = 0.2) -> None:
        super().__init__()
        self.qkv, self.proj, self.heads, self.p = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim), heads, p
        self.head = nn.Linear(dim, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, t, d = x.shape
        q, k, v = self.qkv(x).view(n, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, dropout_p=self.p if self.training else 0.0)
        return self.head(self.proj(a.transpose(1, 2).reshape(n, t, d)).mean(1))


class DecoderNet(nn.Module):
    """nn.TransformerDecoderLayer on a sequence and its own memory (self and cross attention)."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.TransformerDecoderLayer(8, 2, 16, dropout=0.15, batch_first=True)
        self.head = nn.Linear(8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.layer(x, x).mean(1))


class TextLSTM(nn.Module):
    """Embedding -> dropout -> LSTM -> linear, classifying from the last hidden state."""

    def __init__(self) -> None:
        super().__init__()
        self.embed, self.drop = nn.Embedding(20, 6), nn.Dropout(0.2)
        self.lstm, self.out = nn.LSTM(6, 8, batch_first=True), nn.Linear(8, 3)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        _, (h, _) = self.lstm(self.drop(self.embed(tokens)))
        return self.out(h[-1])


class ElmanRegressor(nn.Module):
    """A two-layer nn.RNN with inter-layer dropout (kept as torch's module: its dropout as it draws)."""

    def __init__(self) -> None:
        super().__init__()
        self.rnn, self.head = nn.RNN(3, 8, num_layers=2, dropout=0.3, batch_first=True), nn.Linear(8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.rnn(x)
        return self.head(out[:, -1])
