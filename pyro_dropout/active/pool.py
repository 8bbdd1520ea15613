"""Consistent draws over a pool: the same T functions score every row, in any batches.

:func:`~pyro_dropout.prediction.predict` draws fresh weights at each call, so a pool scored in
batches would see other functions in each batch, and the joint predictive that BatchBALD needs
(one function applied to every candidate) would be wrong. :func:`pool_probs` draws the guide's
latent weights once, ``num_samples`` of them from a seeded generator, and then runs the model
on each batch of the pool with those same weights (:func:`~pyro_dropout.prediction.predict_from_samples`),
so a pool scored in one call, in chunks or through a ``DataLoader`` gives the same draws. The
kept weights cost ``num_samples`` copies of the network's weights (the pool's rows are never all
held at once: a batch at a time).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import torch

from ..batches import batches
from ..ops import check_seed, is_positive_int
from ..prediction import predict, predict_from_samples

__all__ = ["PoolDraws", "pool_probs"]


class PoolDraws:
    """``num_samples`` draws of ``guide``'s latent sites, kept: :meth:`probs` of any rows of a
    pool are those draws' class probabilities ``[T, rows, C]`` (``site``: the likelihood; by
    default the model's only categorical one)."""

    def __init__(
        self, model: Callable, guide: Callable, example: torch.Tensor, num_samples: int = 20, seed: int = 0
    ) -> None:
        if isinstance(num_samples, bool) or not isinstance(num_samples, int) or num_samples < 2:
            raise ValueError(f"pool draws: num_samples must be an int >= 2, got {num_samples!r}")
        check_seed(seed, "pool draws")
        if getattr(guide, "prototype_trace", False) is None:
            raise ValueError(
                "pool draws: the guide has not met the model yet: train it first (or call guide(x, y) "
                "once with labelled rows), its weights are what the pool is scored with"
            )
        self.model = model
        with torch.random.fork_rng(
            devices=[]
        ):  # the draws are PyTorch's: the caller's NumPy, random untouched
            torch.manual_seed(seed)
            first = predict(model, guide, example[:1], num_samples=num_samples)
        # a site with one value in every draw (the point weights of a layer without dropout) is
        # kept once, expanded: the model then computes what depends on it once for all draws
        self.samples = {
            k: v[:1].expand_as(v) if bool((v == v[:1]).all()) else v
            for k, v in first.samples.items()
            if first.kinds.get(k) == "latent"
        }
        if not self.samples:
            raise ValueError(
                "pool draws: the guide has no latent weights to keep (a converted network drawing its own "
                "masks per row, masks='own'): convert it with masks='shared', whose draws are one "
                "function for every row"
            )
        site = next((n for n, kind in first.kinds.items() if kind == "likelihood" and n in first.probs), None)
        if site is None:
            raise ValueError(
                "pool draws: the model has no categorical likelihood (class probabilities) to score"
            )
        self.site: str = site
        if not torch.equal(self.probs(example[:2]), self.probs(example[:2])):
            raise ValueError(
                "pool draws: with its weights fixed the model still draws randomness of its own (a "
                "converted network drawing its own masks per row, masks='own'), so a draw is not one "
                "function of the pool: convert it with masks='shared'"
            )

    def probs(self, x: torch.Tensor) -> torch.Tensor:
        """The kept draws' class probabilities at the rows ``x``: ``[T, len(x), C]``."""
        pred = predict_from_samples(self.model, self.samples, x, return_sites=(self.site,))
        return pred.probs[self.site]

    def stream(self, pool: Any) -> Iterator[torch.Tensor]:
        """:meth:`probs` of each batch of ``pool`` (a tensor is one batch; a ``DataLoader`` or a list
        of batches, streamed: ``(x,)`` or ``(x, y)``, the labels ignored)."""
        for x, _ in batches(pool, "pool draws"):
            yield self.probs(x)


def _once(pool: Any) -> Any:
    """``pool`` itself where it can be read again (a DataLoader, a list), else its batches read
    whole, once (an iterator: reading its first batch to look at it would lose that batch)."""
    try:
        if iter(pool) is not pool:
            return pool
    except TypeError:  # not iterable: batches() says so
        return pool
    return [(x,) if y is None else (x, y) for x, y in batches(pool, "pool_probs")]


def pool_probs(
    model: Callable,
    guide: Callable,
    pool: Any,
    *,
    num_samples: int = 20,
    batch_size: int | None = None,
    seed: int = 0,
) -> torch.Tensor:
    """``[T, N, C]``: the class probabilities of ``num_samples`` draws (seeded, kept for all rows)
    at every row of ``pool`` (a tensor, scored ``batch_size`` rows at a time, or a ``DataLoader``;
    an iterator, which can be read once, is read whole first). Only PyTorch's generator draws, in a
    state of its own: the caller's random states are left as they were."""
    if isinstance(pool, torch.Tensor):
        if batch_size is not None and not is_positive_int(batch_size):
            raise ValueError(f"pool_probs: batch_size must be a positive int, got {batch_size!r}")
        if pool.dim() == 0 or len(pool) == 0:
            raise ValueError(
                f"pool_probs: the pool has no rows (shape {tuple(pool.shape)}): nothing to score"
            )
        step = batch_size or len(pool)
        parts: Any = [(pool[i : i + step],) for i in range(0, len(pool), step)]
        example = pool
    else:
        parts = _once(pool)
        example = next(iter(batches(parts, "pool_probs")))[0]  # an empty pool: a clear error
    draws = PoolDraws(model, guide, example, num_samples, seed)
    return torch.cat(list(draws.stream(parts)), dim=1)
