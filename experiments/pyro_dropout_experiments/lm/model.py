"""A character-level transformer language model (``forward(input_ids) -> logits``), and its
pretraining."""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["CharLM", "pretrain"]


class CharLM(nn.Module):
    """Embeddings and learned positions, ``layers`` causal transformer layers, a linear head."""

    def __init__(
        self, vocabulary: int, width: int, layers: int, heads: int, context: int, dropout: float
    ) -> None:
        super().__init__()
        self.embed, self.position = nn.Embedding(vocabulary, width), nn.Embedding(context, width)
        self.drop = nn.Dropout(dropout)
        layer = nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=dropout, batch_first=True)
        self.body = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(width, vocabulary)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        size = input_ids.shape[1]
        causal = torch.triu(torch.full((size, size), float("-inf"), device=input_ids.device), 1)
        h = self.drop(self.embed(input_ids) + self.position(torch.arange(size, device=input_ids.device)))
        return self.head(self.body(h, mask=causal, is_causal=True))


def pretrain(
    model: CharLM, seqs: torch.Tensor, steps: int, batch: int, lr: float, generator: torch.Generator
) -> list[float]:
    """Next-character cross-entropy by Adam on random batches of ``seqs``; each step's loss."""
    optimiser = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    losses = []
    for _ in range(steps):
        rows = seqs[torch.randint(len(seqs), (batch,), generator=generator)]
        logits = model(rows[:, :-1])
        loss = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), rows[:, 1:].reshape(-1))
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        losses.append(float(loss.detach()))
    return losses
