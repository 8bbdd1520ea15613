r"""Deep ensembles (Lakshminarayanan, Pritzel & Blundell 2017) as one vectorised model.

``M`` networks in the ``"runs"`` plate of an :class:`~pyro_dropout.nn.MLP`, each a MAP point
estimate (a :class:`~pyro_dropout.guides.DropoutGuide` with ``p = 0``: every weight a point mass,
the prior acting as weight decay), each with its own initialisation and its own batches. The
predictive is the equally weighted mixture of the members:

$$
p(y \mid x) = \frac1M \sum_m p(y \mid x, \theta_m),
$$

for regression a mixture of Gaussians (heteroscedastic heads: a mean and a variance per member),
for classification the mean of the members' softmax outputs.

Usage:

    model, guide = deep_ensemble(13, hidden=(50,), members=5)      # x: [5, N, 13], y: [5, N]
    svi = SVI(model, guide, pyro.optim.Adam({"lr": 1e-3}), DropoutELBO())
    ...
    mean, variance = ensemble_predictive(model, guide, x_test)     # x_test: [N, 13]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..guides import DropoutGuide, init_to_fan_in
from ..nn import MLP
from ..ops import is_positive_int
from ..prediction import predict_standard

__all__ = ["deep_ensemble", "ensemble_predictive", "point_estimate_guide"]


def point_estimate_guide(model: Callable, init_loc_fn: Callable = init_to_fan_in) -> DropoutGuide:
    """A MAP guide for ``model``: a :class:`DropoutGuide` with ``p = 0`` (every weight a point mass)."""
    return DropoutGuide(model, dropout=0.0, init_loc_fn=init_loc_fn)


def deep_ensemble(
    in_features: int,
    out_features: int = 1,
    hidden: Sequence[int] = (50,),
    members: int = 5,
    *,
    likelihood: str = "heteroscedastic",
    init_loc_fn: Callable = init_to_fan_in,
    **mlp_kwargs: Any,
) -> tuple[MLP, DropoutGuide]:
    """``members`` networks as one model (``MLP(runs=members)``) and their MAP guide.

    ``likelihood``: ``"heteroscedastic"`` (regression, the paper's mean and variance heads),
    ``"normal"`` or ``"categorical"``. Train with inputs ``[M, N, in]`` and targets ``[M, N]``
    (the same rows for each member, or a bootstrap sample each)."""
    if not is_positive_int(members):
        raise ValueError(f"deep_ensemble: members must be a whole number >= 1, got {members!r}")
    model = MLP(in_features, out_features, hidden, likelihood=likelihood, runs=members, **mlp_kwargs)  # type: ignore[arg-type]
    return model, point_estimate_guide(model, init_loc_fn)


def ensemble_predictive(model: MLP, guide: Callable, x: torch.Tensor) -> Any:
    """The mixture predictive at ``x`` ``[N, in]`` (each member sees the same inputs).

    Regression: ``(mean, variance)``, each ``[N]`` (or ``[N, D]``): the mixture's mean and its
    variance, the members' spread (epistemic) plus their mean variance (aleatoric).
    Classification: the mean class probabilities ``[N, C]``."""
    runs = model.runs
    if runs is None:
        raise ValueError("ensemble_predictive: the model is not an ensemble (MLP(runs=M))")
    if x.dim() < 2:
        raise ValueError(f"ensemble_predictive: x must be [N, in], got shape {tuple(x.shape)}")
    pred = predict_standard(model, guide, x.expand(runs, *x.shape))
    if pred.probs:
        return next(iter(pred.probs.values()))[0].mean(0)
    means, variances = pred.means["obs"][0], pred.variances["obs"][0]  # [M, N]
    mean = means.mean(0)
    return mean, means.var(0, unbiased=False) + variances.mean(0)
