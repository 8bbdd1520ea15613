r"""The expected log predictive density of a dropout model by K-fold cross-validation, as an
ArviZ ``ELPDData`` that ``az.compare`` takes as it takes ``az.loo``'s, and :func:`loo`, which
says when PSIS-LOO on dropout draws is not to be trusted.

Why not PSIS-LOO: it reweights each draw by :math:`1 / p(y_n \mid \omega_t)` as if the draws came
from the exact posterior. MC-dropout draws come from :math:`q`, which puts mass on functions far
from the data (a dropped hidden unit); their weights dominate, most Pareto :math:`\hat k` exceed
0.7, and the estimate can be off by several nats per point (docs/analysis.md measures it).
K-fold refits the model without each fold and scores the fold's points on the refit: no
importance weights, so it holds for any approximate posterior, at the cost of K fits.

Usage:

    relu = kfold(lambda: MLP(1, hidden=(20,), tau="learned"), x, y, k=10, steps=800)
    linear = kfold(lambda: MLP(1, hidden=(), tau="learned"), x, y, k=10, steps=800)
    az.compare({"relu": relu, "linear": linear})
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pyro
import torch
from pyro.optim import PyroOptim
from pyro.util import get_rng_state, set_rng_state

from ..guides import DropoutGuide
from ..infer import CompiledSVI, DropoutELBO
from ..prediction.predictive import predict
from ._arviz_compat import arviz_major

__all__ = ["PSIS_K_LIMIT", "fold_of", "kfold", "loo"]

PSIS_K_LIMIT = 0.7  # Pareto k above which PSIS-LOO's estimate of a point is unreliable


def fold_of(n: int, k: int, seed: int = 0) -> torch.Tensor:
    """``[n]``: each point's fold in ``0..k-1``, the points shuffled by ``seed`` and dealt out in
    turn (the folds' sizes differ by at most one)."""
    if isinstance(k, bool) or not isinstance(k, int) or not 2 <= k <= n:
        raise ValueError(f"kfold: k must be an int in [2, {n}] (the number of points), got {k!r}")
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    folds = torch.empty(n, dtype=torch.long)
    folds[order] = torch.arange(n) % k
    return folds


def _fit(model: Any, guide: Any, x: torch.Tensor, y: torch.Tensor, steps: int, loss: Any, lr: float) -> None:
    optim = PyroOptim(torch.optim.Adam, {"lr": lr})  # pyro.optim.Adam, spelt out for the type checker
    svi = CompiledSVI(model, guide, optim, loss if loss is not None else DropoutELBO())
    for _ in range(steps):
        svi.step(x, y)


def _log_predictive(
    model: Any, guide: Any, x: torch.Tensor, y: torch.Tensor, draws: int, site: str | None
) -> torch.Tensor:
    """``[n]``: :math:`\\log \\frac1T \\sum_t p(y_n \\mid x_n, \\omega_t)` at the likelihood site."""
    pred = predict(model, guide, x, y, num_samples=draws)
    names = list(pred.log_likelihood)
    name = site if site is not None else (names[0] if len(names) == 1 else None)
    if name is None or name not in pred.log_likelihood:
        raise ValueError(f"kfold: choose the likelihood site with site= (the model observes {names})")
    ll = pred.log_likelihood[name].reshape(draws, len(x), -1).sum(-1)  # a point's outputs together
    return (ll.logsumexp(0) - math.log(draws)).double()


def _check(x: Any, y: Any, steps: int, num_samples: int) -> None:
    if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor) or len(x) != len(y):
        raise ValueError("kfold: x and y must be tensors with one row per point (the same length)")
    for name, value in (("steps", steps), ("num_samples", num_samples)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"kfold: {name} must be a positive int, got {value!r}")


def kfold(
    model_factory: Callable[[], Any],
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    k: int = 10,
    guide: Callable[[Any], Any] = DropoutGuide,
    steps: int = 1000,
    loss: Any = None,
    lr: float = 1e-2,
    fit: Callable[[Any, Any, torch.Tensor, torch.Tensor], None] | None = None,
    num_samples: int = 500,
    site: str | None = None,
    seed: int = 0,
) -> Any:
    r"""K-fold cross-validated elpd of the model that ``model_factory()`` builds, trained on
    ``(x, y)`` less each fold and scored on that fold with ``num_samples`` MC-dropout draws.

    Each fold gets a fresh model, ``guide(model)`` (default :class:`DropoutGuide` at its
    defaults) and parameter store (the caller's store and random state are left as they were),
    trained by ``fit(model, guide, x, y)`` or, by default, ``steps`` full-batch steps of
    :class:`CompiledSVI` with ``loss`` (default :class:`DropoutELBO`) and Adam at ``lr``. The folds run one
    after another: the cost is K fits and K predictions.

    :returns: an ArviZ ``ELPDData`` in ``az.loo``'s layout (``elpd_loo``, ``se``, ``p_loo``,
        pointwise ``loo_i``; ``method="kfold"``, ``k``), so that ``az.compare`` ranks it beside
        others of its kind. ``p_loo`` is the in-sample lppd (each point scored by the K - 1 fits
        that trained on it) less the elpd. ArviZ >= 1 has another ``ELPDData``: there, use
        ``result["loo_i"]``.
    """
    _check(x, y, steps, num_samples)
    folds = fold_of(len(x), k, seed)
    held = torch.empty(len(x), dtype=torch.float64)
    inside = torch.zeros(len(x), dtype=torch.float64)
    rng, store = get_rng_state(), pyro.get_param_store()
    try:
        for fold in range(k):
            out = folds == fold
            with store.scope():
                pyro.set_rng_seed(seed + fold)
                model = model_factory()
                made = guide(model)
                (fit or (lambda m, g, a, b: _fit(m, g, a, b, steps, loss, lr)))(model, made, x[~out], y[~out])
                with torch.no_grad():
                    scores = _log_predictive(model, made, x, y, num_samples, site)
            held[out] = scores[out]
            inside[~out] += scores[~out] / (k - 1)
    finally:
        set_rng_state(rng)
    return _elpd_data(held.numpy(), float((inside - held).sum()), num_samples, k)


def _elpd_data(elpd_i: np.ndarray, p: float, draws: int, k: int) -> Any:
    if arviz_major() >= 1:
        raise NotImplementedError(
            "kfold builds arviz 0.x's ELPDData; on arviz >= 1 compare the pointwise values yourself"
        )
    import xarray as xr
    from arviz.stats.stats_utils import ELPDData

    n = len(elpd_i)
    se = float((n * np.var(elpd_i)) ** 0.5)
    pointwise = xr.DataArray(elpd_i, dims=["point"], name="loo_i")
    values = [float(elpd_i.sum()), se, p, draws, n, False, pointwise, "log", "kfold", k]
    index = [
        "elpd_loo",
        "se",
        "p_loo",
        "n_samples",
        "n_data_points",
        "warning",
        "loo_i",
        "scale",
        "method",
        "k",
    ]
    return ELPDData(data=values, index=index)


def loo(idata: Any, **kwargs: Any) -> Any:
    """``az.loo(idata, pointwise=True, **kwargs)``, with one warning where more than 10% of the
    points have Pareto k above 0.7: PSIS-LOO on dropout draws is then not an elpd to use, and
    :func:`kfold` is. The pointwise values are always kept (the check reads their k), whatever
    ``pointwise`` says."""
    import arviz as az

    kwargs.pop("pointwise", None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ArviZ's own warning is replaced by the one below
        result = az.loo(idata, pointwise=True, **kwargs)
    k_hat = np.asarray(result["pareto_k"]).ravel()
    share = float((k_hat > PSIS_K_LIMIT).mean()) if k_hat.size else 0.0
    if share > 0.1:
        warnings.warn(
            f"PSIS-LOO: {share:.0%} of the points have Pareto k > {PSIS_K_LIMIT}, so this elpd can be off "
            "by nats per point (on dropout draws, which are not the exact posterior's, it usually is; on "
            "MCMC draws, more draws may help). Use pyro_dropout.export.kfold(...) for an elpd to compare "
            "models by.",
            stacklevel=2,
        )
    return result
