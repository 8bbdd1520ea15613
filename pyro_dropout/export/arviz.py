r"""Export to ArviZ: ``az.summary``, ``az.loo``, ``az.compare``, ``az.plot_ppc`` on dropout models.

One function covers both ArviZ APIs: ``InferenceData`` (arviz 0.x, the version pip installs
on Python 3.11) and ``DataTree`` (arviz >= 1, Python >= 3.12).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from ..ops import is_positive_int
from ..prediction.predictive import Predictions, predict, predict_from_samples
from ._arviz_compat import build

__all__ = ["from_predictions", "from_samples", "mcmc_to_arviz", "to_arviz"]

Draws = Mapping[str, torch.Tensor | np.ndarray]


def _numpy(value: torch.Tensor | np.ndarray) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    return np.asarray(value)


def _by_chain(value: torch.Tensor | np.ndarray, chains: int, what: str) -> np.ndarray:
    """``[T, ...]`` draws -> ``[chains, T // chains, ...]``."""
    array = _numpy(value)
    if array.ndim == 0 or array.shape[0] % chains:
        raise ValueError(f"{what}: {array.shape} draws do not split into {chains} chains")
    return array.reshape((chains, array.shape[0] // chains) + array.shape[1:])


def from_samples(
    *,
    posterior: Draws | None = None,
    posterior_predictive: Draws | None = None,
    log_likelihood: Draws | None = None,
    observed_data: Draws | None = None,
    chains: int = 1,
    coords: dict[str, Any] | None = None,
    dims: dict[str, list[str]] | None = None,
) -> Any:
    """Build an ArviZ object from sample dicts whose arrays have the draws first (``[T, ...]``).

    The ``T`` draws are split into ``chains`` chains (one chain by default: MC-dropout
    draws are independent). ``observed_data`` has no draw dim. Log-likelihoods are exported in
    float64 (in float32, ArviZ's PSIS overflows where the draws' log-likelihoods of a point
    span more than about 88 nats, and ``loo`` returns NaN). Returns ``InferenceData``
    on arviz 0.x and a ``DataTree`` on arviz >= 1.
    """
    if not is_positive_int(chains):
        raise ValueError(f"from_samples: chains must be a positive int, got {chains!r}")
    groups: dict[str, dict[str, np.ndarray]] = {}
    for group, draws in (
        ("posterior", posterior),
        ("posterior_predictive", posterior_predictive),
        ("log_likelihood", log_likelihood),
    ):
        if draws:
            groups[group] = {k: _by_chain(v, chains, f"{group} '{k}'") for k, v in draws.items()}
    if "log_likelihood" in groups:  # float64: PSIS exponentiates the spread of the log-ratios
        groups["log_likelihood"] = {k: v.astype(np.float64) for k, v in groups["log_likelihood"].items()}
    if observed_data:
        groups["observed_data"] = {k: _numpy(v) for k, v in observed_data.items()}
    if not groups:
        raise ValueError("from_samples: nothing to export")
    _check_dims(groups, dims)
    return build(groups, coords, dims)


def _check_dims(groups: dict[str, dict[str, np.ndarray]], dims: dict[str, list[str]] | None) -> None:
    """Each variable's ``dims`` names at most its own dims (after chain and draw)."""
    if dims is None:
        return
    if not isinstance(dims, dict) or not all(
        isinstance(v, list | tuple) and all(isinstance(d, str) for d in v) for v in dims.values()
    ):
        raise ValueError(f"dims must map a variable to a list of dim names, got {dims!r:.80}")
    known = sorted({name for variables in groups.values() for name in variables})
    unknown = sorted(set(dims) - set(known))
    if unknown:
        raise ValueError(f"dims names {unknown}, which the export does not hold (its variables: {known})")
    for group, variables in groups.items():
        for name, array in variables.items():
            own = array.shape if group == "observed_data" else array.shape[2:]
            if name in dims and len(dims[name]) > len(own):
                raise ValueError(
                    f"dims['{name}'] names {len(dims[name])} dims ({list(dims[name])}), but '{name}' has "
                    f"{len(own)} in {group}, of sizes {tuple(own)}"
                )


AUTO_POSTERIOR_SIZE = 10_000  # values per draw


def _posterior_sites(pred: Predictions, posterior: bool | str | Sequence[str]) -> list[str]:
    latent = [k for k, kind in pred.kinds.items() if kind == "latent"]
    if posterior == "auto":
        sizes = {k: pred.samples[k][0].numel() for k in latent}
        small = [k for k in latent if sizes[k] <= AUTO_POSTERIOR_SIZE]
        return small or ([min(sizes, key=sizes.__getitem__)] if sizes else [])
    if posterior is True:
        return [k for k, kind in pred.kinds.items() if kind != "likelihood"]
    if posterior is False:
        return []
    if isinstance(posterior, str):
        raise ValueError(
            f"to_arviz: posterior must be True, False, 'auto' or a list of sites, got {posterior!r}"
        )
    return list(posterior)


def from_predictions(
    pred: Predictions,
    *,
    posterior: bool | str | Sequence[str] = "auto",
    chains: int = 1,
    coords: dict[str, Any] | None = None,
    dims: dict[str, list[str]] | None = None,
) -> Any:
    """Export :class:`~pyro_dropout.prediction.Predictions`: predictive draws, pointwise
    log-likelihood, observed data, and a posterior group.

    ``posterior``: ``"auto"`` (default) keeps the latent sites with at most 10,000 values
    per draw (at least the smallest one; ArviZ's ``loo`` and ``compare`` need a posterior
    group), ``True`` every latent and deterministic site (weights can be large), ``False``
    none, or a list of site names.
    """
    names = _posterior_sites(pred, posterior)
    missing = [n for n in names if n not in pred.samples or pred.kinds.get(n) == "likelihood"]
    if missing:
        raise ValueError(f"to_arviz: no latent or deterministic sites {missing} in the predictions")
    likelihood = pred.likelihood_sites()
    return from_samples(
        posterior={n: pred.samples[n] for n in names},
        posterior_predictive={n: pred.samples[n] for n in likelihood if n in pred.samples},
        log_likelihood=pred.log_likelihood,
        observed_data=pred.observed,
        chains=chains,
        coords=coords,
        dims=dims,
    )


def to_arviz(
    model: Callable,
    guide: Callable,
    *args: Any,
    num_samples: int = 1000,
    chunk_size: int | None = 100,
    posterior: bool | str | Sequence[str] = "auto",
    coords: dict[str, Any] | None = None,
    dims: dict[str, list[str]] | None = None,
    parallel: bool = True,
    **kwargs: Any,
) -> Any:
    """Predict with ``num_samples`` MC-dropout draws on the given arguments (observations
    included) and export them for ArviZ: ``posterior_predictive``, ``log_likelihood`` (per
    observation), ``observed_data`` and ``posterior`` (see :func:`from_predictions`); the
    draws form one chain. ``parallel=False``: one unbatched pass per draw, for a model that
    cannot take batched weights (as :func:`~pyro_dropout.prediction.predict`).

    What the export is for: ``az.summary``, ``az.plot_ppc`` and the other plots of draws work on
    it as on any export. Its PSIS-LOO (``az.loo``) is not an elpd to compare models by: the
    draws come from the dropout family, not the exact posterior, and most Pareto k exceed 0.7;
    :func:`~pyro_dropout.export.loo` says so where it happens, and
    :func:`~pyro_dropout.export.kfold` gives the elpd to use.

    Usage:

        idata = to_arviz(model, guide, x, y, num_samples=1000)
        az.summary(idata), az.plot_ppc(idata)
        az.compare({"relu": kfold(make_relu, x, y), "linear": kfold(make_linear, x, y)})
    """
    pred = predict(
        model, guide, *args, num_samples=num_samples, chunk_size=chunk_size, parallel=parallel, **kwargs
    )
    if not pred.log_likelihood:
        raise ValueError("to_arviz: the model observed no data; pass the observations as in training")
    return from_predictions(pred, posterior=posterior, coords=coords, dims=dims)


def mcmc_to_arviz(
    model: Callable,
    mcmc: Any,
    *args: Any,
    chunk_size: int | None = 100,
    posterior: bool | str | Sequence[str] = True,
    coords: dict[str, Any] | None = None,
    dims: dict[str, list[str]] | None = None,
    **kwargs: Any,
) -> Any:
    """Export a ``pyro.infer.MCMC`` run of ``model`` in the same layout as :func:`to_arviz`
    (chains kept), so that ``az.compare`` can rank it against MC dropout."""
    by_chain = mcmc.get_samples(group_by_chain=True)
    chains = int(next(iter(by_chain.values())).shape[0])
    flat = {k: v.reshape((-1,) + v.shape[2:]) for k, v in by_chain.items()}
    pred = predict_from_samples(model, flat, *args, chunk_size=chunk_size, **kwargs)
    return from_predictions(pred, posterior=posterior, chains=chains, coords=coords, dims=dims)
