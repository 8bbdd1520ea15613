"""Active learning with MC dropout: consistent draws over a pool, and the acquisition loop.

The scores themselves (BALD, max entropy, variation ratios, mean std, BatchBALD) are in
:mod:`pyro_dropout.metrics`.
"""

from .loop import ActiveLearner, balanced_start
from .pool import PoolDraws, pool_probs

__all__ = ["ActiveLearner", "PoolDraws", "balanced_start", "pool_probs"]
