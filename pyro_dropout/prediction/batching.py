r"""Prediction's batching self-check: before batched draws are trusted, once per model and input
shape, the model is run on one posterior draw twice over, batched in a plate of two draws, and
compared with the unbatched pass that set up the prediction (:func:`~.engine.prepare`), site by
site (:func:`~pyro_dropout.infer.batching_check.compare_batched`). Where they differ,
prediction runs one draw at a time (``parallel=False``) and warns once, naming the site and the
largest difference: a batched result that would be wrong is never returned. It costs one pass of
the model on two draws, once per input shape and state of the model and guide (the verdicts are
kept by the caller: :class:`~.recorded.ChunkGraphs`, with the guide); the random state is left as it
was, so the draws are those of an unchecked run.
"""

from __future__ import annotations

import warnings
from collections.abc import Hashable

from ..guards import signature
from ..infer.batching_check import compare_batched, describe_mismatch, latent_values
from .chunks import ChunkRunner
from .collect import DRAWS_PLATE

__all__ = ["batched_is_exact", "remember_unbatched"]


def batched_is_exact(runner: ChunkRunner, verdicts: dict, state: Hashable = None) -> bool:
    """Whether batched draws of the runner's model may be trusted for inputs like its arguments in
    ``state`` (checked once per signature and state, kept in ``verdicts``; a model that checks
    itself, ``checks_its_batching``, is trusted)."""
    model = runner.model
    if getattr(model, "checks_its_batching", False):
        return True
    key = (signature(runner.args, runner.kwargs), state)
    if key not in verdicts:
        if len(verdicts) >= 32:
            verdicts.clear()
        latents = latent_values(runner.prototype, runner.latents)
        found = compare_batched(
            model, runner.prototype, latents, DRAWS_PLATE, runner.nesting, runner.args, runner.kwargs
        )
        verdicts[key] = found is None
        if found is not None:
            warnings.warn(
                "predict: the model's batched draws do not match one draw at a time "
                f"{describe_mismatch(found)}. Its draws run one at a time from now on "
                "(parallel=False): exact, slower",
                stacklevel=4,
            )
    return verdicts[key]


def remember_unbatched(runner: ChunkRunner, verdicts: dict, state: Hashable = None) -> None:
    """The runner's model runs its draws one at a time for inputs like its arguments in ``state``
    from now on (its batched draws failed after the check passed)."""
    verdicts[(signature(runner.args, runner.kwargs), state)] = False
