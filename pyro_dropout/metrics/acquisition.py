r"""Acquisition scores for active learning from MC-dropout draws ``probs[t, n, c]``: higher means
"label this point next".

Gal, Islam & Ghahramani (2017, "Deep Bayesian Active Learning with Image Data") compare, on the
draws :math:`p_t(y \mid x)` of T dropout passes:

* **BALD** (Houlsby et al. 2011): the mutual information between the label and the weights,
  :math:`\mathcal H[\bar p] - \frac1T \sum_t \mathcal H[p_t]` (:func:`bald`, the same as
  :func:`~pyro_dropout.metrics.mutual_information`);
* **max entropy**: the predictive entropy :math:`\mathcal H[\bar p]` (:func:`max_entropy`);
* **variation ratios**: :math:`1 - f_\text{mode} / T` (:func:`variation_ratios`);
* **mean std** (Kendall et al. 2015): the sd over draws of each class's probability, averaged
  over the classes, :math:`\frac1C \sum_c \sqrt{\mathbb E_t[p_{tc}^2] - \mathbb E_t[p_{tc}]^2}`
  (:func:`mean_std`);
* **random**: uniform scores, the baseline (:func:`random_scores`).

For regression the epistemic variance of the draws' means, :math:`\mathrm{Var}_t[\mu_t(x)]`
(:func:`epistemic_variance`), plays BALD's part. A batch is chosen jointly by
:func:`~pyro_dropout.metrics.batch_bald`.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ._checks import check_probs
from .classification import mutual_information, predictive_entropy, variation_ratio

__all__ = [
    "ACQUISITIONS",
    "acquisition_scores",
    "bald",
    "check_acquisition",
    "epistemic_variance",
    "max_entropy",
    "mean_std",
    "random_scores",
    "variation_ratios",
]


def bald(probs: object) -> torch.Tensor:
    """BALD ``[N]``: the mutual information between each point's label and the weights (two draws at
    least: with one, every score is zero and the pick arbitrary)."""
    return mutual_information(check_probs(probs, "bald: probs", min_draws=2))


def max_entropy(probs: object) -> torch.Tensor:
    """Max entropy ``[N]``: the entropy of the MC predictive."""
    return predictive_entropy(check_probs(probs, "max_entropy: probs"))


def variation_ratios(probs: object) -> torch.Tensor:
    """Variation ratios ``[N]``: the share of draws whose top class is not the modal one (two draws
    at least)."""
    return variation_ratio(check_probs(probs, "variation_ratios: probs", min_draws=2))


def mean_std(probs: object) -> torch.Tensor:
    """Mean std ``[N]``: each class probability's sd over the draws, averaged over the classes (two
    draws at least)."""
    p = check_probs(probs, "mean_std: probs", min_draws=2)
    variance = (p * p).mean(0) - p.mean(0) ** 2
    return variance.clamp_min(0).sqrt().mean(-1)


def random_scores(probs: object, generator: torch.Generator | None = None) -> torch.Tensor:
    """Uniform scores ``[N]`` (random acquisition), one per point of ``probs``."""
    p = check_probs(probs, "random_scores: probs")
    return torch.rand(p.shape[1], generator=generator, dtype=p.dtype)


def epistemic_variance(means: object) -> torch.Tensor:
    """The variance over draws of the predictive means ``[T, N]``, per point (regression's BALD
    under a Gaussian likelihood of fixed noise: the part of the predictive variance the weights cause)."""
    m = means if isinstance(means, torch.Tensor) else torch.as_tensor(means)
    if m.dim() != 2 or m.shape[0] < 2 or m.shape[1] < 1:
        raise ValueError(
            f"epistemic_variance: means must be [T >= 2, N >= 1] draws of the points, got {tuple(m.shape)}"
        )
    if not bool(torch.isfinite(m).all()):
        raise ValueError("epistemic_variance: the means hold NaN or infinite values")
    return m.var(0, unbiased=False)


ACQUISITIONS: dict[str, Callable[[object], torch.Tensor]] = {
    "bald": bald,
    "max_entropy": max_entropy,
    "variation_ratios": variation_ratios,
    "mean_std": mean_std,
    "random": random_scores,
}


def check_acquisition(name: str) -> None:
    """A clear error where ``name`` is not one of :data:`ACQUISITIONS`."""
    if name not in ACQUISITIONS:
        raise ValueError(f"acquisition: unknown function {name!r}; choose from {', '.join(ACQUISITIONS)}")


def acquisition_scores(name: str, probs: object, generator: torch.Generator | None = None) -> torch.Tensor:
    """The scores ``[N]`` of acquisition function ``name`` (one of :data:`ACQUISITIONS`)."""
    check_acquisition(name)
    if name == "random":
        return random_scores(probs, generator)
    return ACQUISITIONS[name](probs)
