r"""Prediction's batching self-check: before batched draws are trusted, once per model and input
shape, the model is run on one posterior draw twice over, batched in a plate of two draws, and
compared with the unbatched pass that set up the prediction (:func:`~.engine.prepare`), site by
site (:func:`~pyro_dropout.infer.batching_check.compare_batched`). Where they differ,
prediction runs one draw at a time (``parallel=False``) and warns once, naming the site and the
largest difference: a batched result that would be wrong is never returned. It costs one pass of
the model on two draws, once; the random state is left as it was, so the draws are those of an
unchecked run.
"""

from __future__ import annotations

import warnings
import weakref

from ..guards import signature
from ..infer.batching_check import compare_batched, describe_mismatch, latent_values
from .chunks import ChunkRunner
from .collect import DRAWS_PLATE

__all__ = ["batched_is_exact", "remember_unbatched"]

_VERDICTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> {signature: exact}


def batched_is_exact(runner: ChunkRunner) -> bool:
    """Whether batched draws of the runner's model may be trusted for inputs like its arguments
    (checked once per model and input shape; a model that checks itself,
    ``checks_its_batching``, is trusted)."""
    model = runner.model
    if getattr(model, "checks_its_batching", False):
        return True
    try:
        verdicts = _VERDICTS.setdefault(model, {})
    except TypeError:  # not weakly referable: check every time
        verdicts = {}
    key = signature(runner.args, runner.kwargs)
    if key not in verdicts:
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


def remember_unbatched(runner: ChunkRunner) -> None:
    """The runner's model runs its draws one at a time for inputs like its arguments from now on
    (its batched draws failed after the check passed)."""
    try:
        _VERDICTS.setdefault(runner.model, {})[signature(runner.args, runner.kwargs)] = False
    except TypeError:  # not weakly referable
        pass
