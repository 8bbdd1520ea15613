r"""Exact leave-one-out for the points PSIS flags: ArviZ's ``az.reloo`` with a refit of the
dropout model without each flagged point.

``az.reloo`` keeps PSIS-LOO's value for every point whose Pareto :math:`\hat k` is at most
``k_thresh`` and replaces each other one by :math:`\log \frac1T \sum_t p(y_n \mid x_n,
\omega_t^{(-n)})`, from a model fitted without point ``n``: one fit per flagged point. On dropout
draws the unflagged points' values are still importance-sampling estimates from :math:`q`,
not from a refit, and more than a few points are usually flagged; docs/analysis.md measures both
against :func:`~pyro_dropout.export.kfold`, which refits K times whatever the k.

Usage:

    psis = loo(to_arviz(model, guide, x, y))
    exact = reloo(lambda: MLP(1, hidden=(20,), tau="learned"), x, y, psis, steps=800)
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import Any

import pyro
import torch
from pyro.util import get_rng_state, set_rng_state

from ..guides import DropoutGuide, apart
from ._arviz_compat import arviz_major
from .kfold import PSIS_K_LIMIT
from .refit import Refit, check_factory, check_rows, draws_log_likelihood

__all__ = ["reloo", "sampling_wrapper"]


def sampling_wrapper(model_factory: Callable[[], Any], x: torch.Tensor, y: torch.Tensor, refit: Refit) -> Any:
    """An ``arviz.SamplingWrapper`` for ``az.reloo``: ``sample`` fits a fresh
    ``model_factory()`` under ``refit.guide(model)`` on the rows it is given (``refit.train``,
    seeded by ``refit.seed`` plus the left-out row), in a parameter store of its own; and
    ``log_likelihood__i`` scores the left-out row under ``refit.draws`` draws of that fit."""
    import arviz as az
    import xarray as xr

    class DropoutRefit(az.SamplingWrapper):
        def sel_observations(self, idx: Any) -> tuple[Any, Any]:
            out = torch.zeros(len(x), dtype=torch.bool)
            out[torch.as_tensor(idx).reshape(-1)] = True
            return (x[~out], y[~out], out), (x[out], y[out])

        def sample(self, modified_observed_data: Any) -> Any:
            xs, ys, out = modified_observed_data
            store = pyro.get_param_store()
            with apart():
                pyro.set_rng_seed(refit.seed + int(out.nonzero()[0]))
                model = model_factory()
                guide = refit.guide(model)
                refit.train(model, guide, xs, ys)
                return model, guide, store.get_state()

        def get_inference_data(self, fitted: Any) -> Any:
            return fitted

        def log_likelihood__i(self, excluded_obs: Any, idata__i: Any) -> Any:
            model, guide, state = idata__i
            store = pyro.get_param_store()
            with apart(owner=guide), torch.no_grad():
                store.set_state(state)
                x_i, y_i = excluded_obs
                ll = draws_log_likelihood(model, guide, x_i, y_i, refit.draws, refit.site, (1,))
            return xr.DataArray(ll.double().cpu().numpy().reshape(-1))  # from any device

    return DropoutRefit(model=model_factory)


def reloo(
    model_factory: Callable[[], Any],
    x: torch.Tensor,
    y: torch.Tensor,
    loo_orig: Any,
    *,
    guide: Callable[[Any], Any] = DropoutGuide,
    steps: int = 1000,
    loss: Any = None,
    lr: float = 1e-2,
    fit: Callable[[Any, Any, torch.Tensor, torch.Tensor], None] | None = None,
    num_samples: int = 500,
    site: str | None = None,
    seed: int = 0,
    k_thresh: float = PSIS_K_LIMIT,
) -> Any:
    """``az.reloo`` of ``loo_orig`` (``az.loo``'s or :func:`~pyro_dropout.export.loo`'s result,
    pointwise, on the model fitted to ``(x, y)``): each point with Pareto k above ``k_thresh``
    is scored by a fit without it, as :func:`~pyro_dropout.export.kfold` fits a fold (the same
    arguments). Costs one fit per flagged point. The caller's parameter store and random state
    are left as they were. ArviZ calls ``az.reloo`` experimental; its warning saying so is not
    repeated here.

    :returns: ``loo_orig`` with the flagged points' ``loo_i``, ``elpd_loo``, ``se`` and
        ``p_loo`` recomputed (ArviZ 0.x's ``ELPDData``)."""
    import arviz as az

    if arviz_major() >= 1:
        raise NotImplementedError(
            "reloo wraps arviz 0.x's az.reloo; on arviz >= 1 use kfold's pointwise values"
        )
    check_factory(model_factory, "reloo")
    check_rows("reloo", x, y)
    if getattr(loo_orig, "pareto_k", None) is None:
        raise ValueError(
            "reloo: loo_orig must be a pointwise az.loo result (with Pareto k); a K-fold result has no "
            "Pareto k, and nothing to refit: its points were each scored by a fit without them"
        )
    if getattr(loo_orig, "loo_i", None) is None or len(loo_orig.loo_i) != len(x):
        raise ValueError("reloo: loo_orig must be a pointwise az.loo result with one value per row of x")
    if isinstance(k_thresh, bool) or not isinstance(k_thresh, int | float) or not math.isfinite(k_thresh):
        raise ValueError(f"reloo: k_thresh must be a finite number (Pareto k), got {k_thresh!r}")
    refit = Refit(guide, fit, steps, loss, lr, num_samples, site, seed, who="reloo")
    state = get_rng_state()
    try:
        # a deep copy: az.reloo changes its loo_orig's pointwise arrays in place
        kept = copy.deepcopy(loo_orig)
        wrapper = sampling_wrapper(model_factory, x, y, refit)
        return az.reloo(wrapper, loo_orig=kept, k_thresh=k_thresh, verbose=False)
    finally:
        set_rng_state(state)
