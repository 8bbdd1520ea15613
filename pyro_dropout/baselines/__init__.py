"""Baselines on the same data: mean-field VI, deep ensembles, a sparse GP and HMC."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from .hmc import run_nuts
from .mean_field import MeanFieldGuide
from .sparse_gp import fit_sparse_gp

if TYPE_CHECKING:
    from ..datasets import UCIDataset

__all__ = ["MeanFieldGuide", "fit_sparse_gp", "run_baseline_split", "run_nuts"]


def run_baseline_split(method: str, data: UCIDataset, split: int, settings: Any) -> dict[str, Any]:
    """One split of the UCI protocol for the non-vectorised baselines ``"sgp"`` and ``"hmc"``."""
    from ..experiments.vectorised import Standardiser, score_runs
    from ..infer import predict_from_samples
    from ..nn import MLP

    rows = data.splits[split]
    dtype = torch.get_default_dtype()
    x_train = torch.tensor(data.x[rows.train], dtype=dtype).unsqueeze(0)
    y_train = torch.tensor(data.y[rows.train], dtype=dtype).unsqueeze(0)
    x_test = torch.tensor(data.x[rows.test], dtype=dtype).unsqueeze(0)
    y_test = torch.tensor(data.y[rows.test], dtype=dtype).unsqueeze(0)
    stats = Standardiser.fit(x_train, y_train)
    xs, ys, xt = stats.x(x_train)[0], stats.y(y_train)[0], stats.x(x_test)[0]
    scale, shift = stats.y_std, stats.y_mean
    extra: dict[str, Any] = {}
    if method == "sgp":
        gp = fit_sparse_gp(
            xs, ys, min(settings.sgp_inducing, len(xs)), settings.sgp_steps, seed=settings.seed
        )
        with torch.no_grad():
            mu, var = gp(xt, full_cov=False, noiseless=False)
        mu, var = mu.unsqueeze(0).unsqueeze(0), var.unsqueeze(0).unsqueeze(0)  # one "draw", one run
        num = 1
        extra["noise_sd"] = float(gp.noise.detach().sqrt() * scale[0])
    elif method == "hmc":
        model = MLP(
            xs.shape[1],
            hidden=(data.n_hidden,),
            tau="learned",
            tau_prior=settings.concrete_tau_prior,
            prior="normal",
            length_scale=settings.mfvi_length_scale,
        )
        samples = run_nuts(
            model,
            xs,
            ys,
            settings.hmc_warmup,
            settings.hmc_samples,
            settings.hmc_max_tree_depth,
            settings.seed,
        )
        pred = predict_from_samples(model, samples, xt, return_sites=())
        mu, var = pred.means["obs"].unsqueeze(1), pred.variances["obs"].unsqueeze(1)  # [T, 1, m]
        num = mu.shape[0]
        extra["num_posterior_samples"] = num
        extra["tau"] = float((samples["tau"] / scale.pow(2)).mean())
    else:
        raise ValueError(f"not a baseline run split by split: {method!r}")
    mu, var = mu * scale.reshape(1, 1, 1) + shift.reshape(1, 1, 1), var * scale.pow(2).reshape(1, 1, 1)
    scores = score_runs(lambda c: (mu, var), y_test, num, num)
    return {
        "rmse": float(scores.rmse[0]),
        "rmse_standard": None,
        "test_ll": float(scores.test_ll[0]),
        **{f"coverage_{round(100 * k)}": float(v[0]) for k, v in scores.coverage.items()},
        "n_train": len(rows.train),
        "n_test": len(rows.test),
        **extra,
    }
