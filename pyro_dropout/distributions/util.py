"""Small helpers about distributions shared by the layers above."""

from __future__ import annotations

from torch.distributions import Distribution, Independent

__all__ = ["base_prior"]


def base_prior(fn: Distribution) -> Distribution:
    """The distribution under any ``Independent`` (``.to_event``) wrappers."""
    while isinstance(fn, Independent):
        fn = fn.base_dist
    return fn
