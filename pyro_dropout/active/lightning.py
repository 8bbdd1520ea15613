"""An active-learning pool scored under ``lightning.Trainer.predict``, across devices or processes.

``lightning`` is an optional extra (``pip install 'pyro-dropout[lightning]'``), imported here only:
``pyro_dropout.active`` itself does not need it.

    module = PoolScoringModule(model, guide, x_pool[:4], num_samples=20)
    parts = lightning.Trainer(strategy="ddp", devices=4).predict(module, pool_loader)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ..metrics import acquisition_scores, check_acquisition
from .pool import PoolDraws

try:
    import lightning
except ImportError as e:  # an optional extra: only this module needs it
    raise ImportError(
        "pyro_dropout.active.lightning needs lightning: pip install 'pyro-dropout[lightning]'"
    ) from e

__all__ = ["PoolScoringModule"]


class PoolScoringModule(lightning.LightningModule):
    """An active-learning pool scored under ``lightning.Trainer.predict``, across devices or
    processes: each rank scores its shard of the pool's ``DataLoader`` with the same
    ``num_samples`` draws (:class:`~pyro_dropout.active.PoolDraws`, seeded: every rank draws the
    same weights from the same parameters), so the shards' scores are those of one pass over
    the whole pool, and their class probabilities share the draws BatchBALD needs.

    :param model: a trained Pyro model with a categorical likelihood.
    :param guide: its trained :class:`~pyro_dropout.guides.DropoutGuide`.
    :param example: a few pool rows (the draws are set up on them).
    :param acquisition: the score of :data:`~pyro_dropout.metrics.ACQUISITIONS` each row gets.
    :param keep_probs: also return the draws' class probabilities ``[T, rows, C]``.
    """

    def __init__(
        self,
        model: Callable,
        guide: Any,
        example: torch.Tensor,
        num_samples: int = 20,
        seed: int = 0,
        acquisition: str = "bald",
        keep_probs: bool = False,
    ) -> None:
        super().__init__()
        check_acquisition(acquisition)
        self.model, self.guide = model, guide
        self.draws = PoolDraws(model, guide, example, num_samples, seed)
        self.acquisition, self.keep_probs, self.seed = acquisition, keep_probs, seed

    def predict_step(self, batch: Any, batch_idx: int) -> dict[str, torch.Tensor]:
        """``{"scores": [rows]}`` (and ``"probs"``) for this rank's batch ``x`` or ``(x, ...)``."""
        x = batch[0] if isinstance(batch, list | tuple) else batch
        with torch.no_grad():
            probs = self.draws.probs(x)
        g = torch.Generator(device=probs.device).manual_seed(self.seed + batch_idx)
        out = {"scores": acquisition_scores(self.acquisition, probs, g)}
        return {**out, "probs": probs} if self.keep_probs else out
