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

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pyro
import torch
from pyro.util import get_rng_state, set_rng_state

from ..guides import DropoutGuide, apart
from ._arviz_compat import arviz_major
from .kfold_runs import fit_and_score, runs_model, split_scores
from .refit import Refit, check_factory, check_rows

__all__ = ["PSIS_K_LIMIT", "fold_of", "kfold", "kfold_result", "loo"]

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


def _check(x: Any, y: Any, vectorize: Any) -> None:
    """The data and ``vectorize`` (the fitting settings: :class:`Refit`)."""
    check_rows("kfold", x, y)
    if not (vectorize is True or vectorize is False or vectorize == "auto"):
        raise ValueError(f"kfold: vectorize must be 'auto', True or False, got {vectorize!r}")


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
    vectorize: bool | str = "auto",
) -> Any:
    r"""K-fold cross-validated elpd of the model that ``model_factory()`` builds, trained on
    ``(x, y)`` less each fold and scored on that fold with ``num_samples`` MC-dropout draws.

    Each fold's model is fitted by ``fit(model, guide, x, y)`` or, by default, ``steps``
    full-batch steps of :class:`CompiledSVI` with ``loss`` (default :class:`DropoutELBO`) and
    Adam at ``lr``, under ``guide(model)``; the caller's store and random state are kept.

    **Folds trained together.** Where ``model_factory()`` builds a :class:`~pyro_dropout.nn.MLP`
    as ``MLP(...)`` left it, ``guide`` makes a :class:`DropoutGuide` and ``fit`` is not given,
    the K folds train as one ``MLP.with_runs(K)``: every run sees all rows with its own fold's
    likelihood masked out, which is the same loss as its fold's fit (:mod:`.kfold_runs`), in one
    vectorised pass. Otherwise the folds run one after another: K fits and K predictions.
    ``vectorize=True`` requires the first (an error says why it cannot), ``False`` the second.

    :returns: an ArviZ ``ELPDData`` in ``az.loo``'s layout (``elpd_loo``, ``se``, ``p_loo``,
        pointwise ``loo_i``; ``method="kfold"``, ``k``), so that ``az.compare`` ranks it beside
        others of its kind. ``p_loo`` is the in-sample lppd (each point scored by the K - 1 fits
        that trained on it) less the elpd. On ArviZ >= 1 (another ``ELPDData``) it raises.
    """
    _check(x, y, vectorize)
    check_factory(model_factory, "kfold")
    plan = Refit(guide, fit, steps, loss, lr, num_samples, site, seed)
    folds = fold_of(len(x), k, seed)
    rng = get_rng_state()
    try:
        scores = _together(model_factory, x, y, folds, k, plan) if vectorize is not False else None
        if isinstance(scores, str) and vectorize is True:
            raise ValueError(f"kfold(vectorize=True): the folds cannot be trained together: {scores}")
        if not isinstance(scores, torch.Tensor):
            scores = _one_by_one(model_factory, x, y, folds, k, plan)
    finally:
        set_rng_state(rng)
    return kfold_result(scores, folds, num_samples)


def _together(
    factory: Callable[[], Any], x: torch.Tensor, y: torch.Tensor, folds: torch.Tensor, k: int, plan: Refit
) -> torch.Tensor | str:
    """The folds' ``[K, N]`` scores from one model holding K runs, or why that cannot be."""
    if plan.fit is not None:
        return "a fit= of one's own trains one model at a time"
    with apart():
        pyro.set_rng_seed(plan.seed)
        net = runs_model(factory(), k)
        if isinstance(net, str):
            return net
        score = lambda m, g, xs, ys: plan.score(m, g, xs, ys, (k, len(x)))  # noqa: E731
        return fit_and_score(net, plan.guide, x, y, folds, plan.train, score)


def _one_by_one(
    factory: Callable[[], Any], x: torch.Tensor, y: torch.Tensor, folds: torch.Tensor, k: int, plan: Refit
) -> torch.Tensor:
    """The folds' ``[K, N]`` scores from K fits, one fold after another."""
    scores = torch.empty(k, len(x), dtype=torch.float64)
    for fold in range(k):
        out = folds == fold
        with apart():
            pyro.set_rng_seed(plan.seed + fold)
            model = factory()
            made = plan.guide(model)
            plan.train(model, made, x[~out], y[~out])
            with torch.no_grad():
                scores[fold] = plan.score(model, made, x, y, (len(x),))
    return scores


def kfold_result(scores: torch.Tensor, folds: torch.Tensor, draws: int) -> Any:
    """The ``ELPDData`` that :func:`kfold` returns, from ``scores`` ``[K, N]`` (each row's log
    predictive density under each fold's fit, of ``draws`` draws) and ``folds`` (each row's fold):
    each row's held-out score is its own fold's, and ``p_loo`` is the in-sample lppd (its mean score
    under the K - 1 fits that trained on it) less the elpd. For K-fold with fits of another kind
    (MCMC, say) as well as :func:`kfold`'s."""
    if arviz_major() >= 1:
        raise NotImplementedError(
            "kfold builds arviz 0.x's ELPDData; on arviz >= 1 compare the pointwise values yourself"
        )
    import xarray as xr
    from arviz.stats.stats_utils import ELPDData

    held, inside = split_scores(scores.detach().to("cpu", torch.float64), folds.cpu())  # from any device
    elpd_i, p, k = held.numpy(), float((inside - held).sum()), scores.shape[0]
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


def _check_log_likelihood(idata: Any) -> None:
    """Every pointwise log-likelihood finite: a NaN or -inf gives an elpd of nan (with ArviZ's own
    warnings, which :func:`loo` silences) or of -inf, not an estimate."""
    group = getattr(idata, "log_likelihood", None)
    if group is None:  # az.loo says so itself
        return
    for name, values in group.data_vars.items():
        array = np.asarray(values)
        bad = ~np.isfinite(array)
        if bad.any():
            raise ValueError(
                f"loo: the log-likelihood of {name!r} holds {int(bad.sum())} NaN or infinite values "
                f"(of {array.size}): a point the model gives no density at has no elpd"
            )


def loo(idata: Any, **kwargs: Any) -> Any:
    """``az.loo(idata, pointwise=True, **kwargs)``, with one warning where more than 10% of the
    points have Pareto k above 0.7: PSIS-LOO on dropout draws is then not an elpd to use, and
    :func:`kfold` is. The pointwise values are always kept (the check reads their k), whatever
    ``pointwise`` says."""
    import arviz as az

    kwargs.pop("pointwise", None)
    _check_log_likelihood(idata)
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
