"""``MCDropout``: the front door for a trained network with dropout (``door.py``), the noise level
of its regression likelihood (``noise.py``), and generation for causal language models with its
sequence scores (``generation.py``)."""

from .door import MCDropout
from .generation import Generation, SequenceScores
from .noise import NoiseLevel, held_out_tau

__all__ = ["Generation", "MCDropout", "NoiseLevel", "SequenceScores", "held_out_tau"]
