"""``MCDropout``: the front door for a trained network with dropout (``door.py``), and the noise
level of its regression likelihood (``noise.py``)."""

from .door import MCDropout
from .noise import NoiseLevel, held_out_tau

__all__ = ["MCDropout", "NoiseLevel", "held_out_tau"]
