"""``pyro-dropout lm-uncertainty``'s settings: the full and the quick values."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..core import known_names

__all__ = ["QUICK", "VARIANTS", "LMSettings"]

VARIANTS = ("pretrained", "fixed", "concrete", "bbalpha", "ensemble")


@dataclass(frozen=True)
class LMSettings:
    """A character-level transformer language model trained on the docstrings of Python's standard
    library, then LoRA-fine-tuned on the docstrings of PyTorch: with the adapters' dropout at a
    fixed rate (``fixed``, DropoutELBO), learned by Concrete dropout (``concrete``), or under BB-α
    with α = 0.5 (``bbalpha``); ``ensemble``: a deep ensemble of ``members`` adapters, each
    fine-tuned as ``fixed`` from its own seed and predicting with its dropout off (the spread is
    between members, not between dropout draws); ``pretrained``: the model before any fine-tuning,
    for reference. Each is scored by its predictive on held-out PyTorch docstrings (perplexity,
    next-token ECE) and on telling them from the standard library's docstrings and from shuffled
    text."""

    variants: tuple[str, ...] = field(
        default=VARIANTS, metadata={"help": "variants", "parse_check": known_names(VARIANTS, "variants")}
    )
    context: int = field(default=64, metadata={"help": "characters per sequence", "positive": True})
    width: int = field(default=64, metadata={"help": "the model's width", "positive": True})
    layers: int = field(default=2, metadata={"help": "transformer layers", "positive": True})
    heads: int = field(default=4, metadata={"help": "attention heads", "positive": True})
    dropout: float = field(
        default=0.1, metadata={"help": "the base model's dropout", "positive": True, "maximum": 0.9}
    )
    pretrain_steps: int = field(default=2000, metadata={"help": "pretraining steps", "positive": True})
    batch_size: int = field(default=32, metadata={"help": "sequences per step", "positive": True})
    lr: float = field(default=3e-3, metadata={"help": "pretraining's Adam learning rate", "positive": True})
    rank: int = field(default=8, metadata={"help": "LoRA rank", "positive": True})
    lora_dropout: float = field(
        default=0.1,
        metadata={"help": "the adapters' dropout (concrete: its start)", "positive": True, "maximum": 0.9},
    )
    sequences: int = field(
        default=1500, metadata={"help": "fine-tuning sequences of the second domain", "positive": True}
    )
    epochs: int = field(default=3, metadata={"help": "fine-tuning epochs", "positive": True})
    finetune_lr: float = field(
        default=3e-3, metadata={"help": "fine-tuning's learning rate", "positive": True}
    )
    eval_sequences: int = field(
        default=200, metadata={"help": "held-out sequences per set", "positive": True}
    )
    draws: int = field(default=50, metadata={"help": "MC-dropout draws", "positive": True})
    members: int = field(
        default=5, metadata={"help": "adapters in the deep ensemble (variant ensemble)", "minimum": 2}
    )
    repeats: int = field(default=3, metadata={"help": "runs per variant (seeds)", "positive": True})
    seed: int = field(default=0, metadata={"help": "seed of the first run", "minimum": 0})


# what --quick changes: a shorter pretraining, fewer sequences and draws (minutes on 2 CPU cores)
QUICK: dict[str, Any] = {
    "pretrain_steps": 300,
    "sequences": 400,
    "epochs": 1,
    "eval_sequences": 60,
    "draws": 20,
    "repeats": 1,
}
