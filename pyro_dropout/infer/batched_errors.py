"""A model that cannot take weights batched over draws fails with an error that says so, and how
to go on, instead of torch's "t() expects a tensor with <= 2 dimensions"."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from ..guides.ownership import GuideConflictError

__all__ = ["BatchedDrawError", "explain_batched_failure"]

# failures that batching over draws cannot cause, passed on as they are
NOT_BATCHING = ("Expected all tensors to be on the same device", "the same dtype")


class BatchedDrawError(RuntimeError):
    """The model failed on weights with a leading draw dimension (vectorised particles or
    parallel prediction); the message names the ways to go on."""


@contextmanager
def explain_batched_failure(entry: str, fix: str) -> Iterator[None]:
    """Re-raise a failure of the model inside a batched-draw pass as a :class:`BatchedDrawError`
    naming ``fix`` (the unbatched switch of ``entry``: ``vectorize_particles=False``,
    ``parallel=False``), with the original error chained."""
    try:
        yield
    except (RuntimeError, IndexError, ValueError) as error:
        plate = isinstance(error, ValueError) and str(error).startswith("Shape mismatch inside plate")
        if isinstance(error, BatchedDrawError | GuideConflictError) or (
            isinstance(error, ValueError) and not plate
        ):
            raise  # the set-up's own errors are not the model's failing on batched weights
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        if any(text in first for text in NOT_BATCHING):
            raise  # tensors on two devices or of two dtypes: no batching makes that
        if (
            "inside plate('num_particles_vectorized')" in first
            or "inside plate('_pyro_dropout_draws')" in first
        ):
            raise BatchedDrawError(
                f"{entry}: {first}: a site's points stand where the draws' plate is, as when the model has "
                'no data plate around its likelihood; write `with pyro.plate("data", len(x)): '
                "pyro.sample(...)` (or declare the points one event with "
                f".to_event(1)), or run unbatched with {fix}"
            ) from error
        raise BatchedDrawError(
            f"{entry}: the model failed on weights batched over draws (a weight [out, in] comes as "
            f"[S, 1, out, in]): {first}. A layer that takes only unbatched weights (nn.Linear or F.linear "
            "on a sampled weight, as in a pyro.random_module model; F.max_pool2d on 5-d inputs), or a plate "
            "sized from the predictions (pyro.plate(..., subsample=predictions), as TyXe's likelihoods), "
            "cannot run them: use pyro_dropout.nn.Linear / Conv2d, PyroModule[nn.Linear] / [nn.Conv2d], or "
            "pyro_dropout.nn.functional (linear, matmul, conv2d, max_pool2d, flatten); or run "
            f"unbatched with {fix}"
        ) from error
