r"""One-call summaries of a trained model: ``evaluate(model, guide, x, y)``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ..ops import log_mean_exp
from ..prediction.predictive import Predictions
from .classification import (
    brier_score,
    mutual_information,
    predictive_entropy,
    reliability_diagram,
    variation_ratio,
)
from .ranking import aupr, auroc
from .regression import coverage, crps, miscalibration_area, pit, rmse

__all__ = [
    "ClassificationReport",
    "LikelihoodReport",
    "RegressionReport",
    "classification_report",
    "ood_detection",
    "regression_report",
    "site_of",
    "uncertainty_scores",
]

LEVELS = (0.5, 0.8, 0.9, 0.95)


def site_of(pred: Predictions, site: str | None) -> str:
    sites = pred.likelihood_sites()
    if site is not None:
        if site not in sites:
            raise ValueError(f"no likelihood site '{site}' in the predictions (have: {sites})")
        return site
    if len(sites) != 1:
        raise ValueError(f"the model has likelihood sites {sites}; choose one with site=")
    return sites[0]


def _table(rows: dict[str, Any]) -> str:
    width = max(len(k) for k in rows)
    return "\n".join(
        f"{k:>{width}s}  {v:.4f}" if isinstance(v, float) else f"{k:>{width}s}  {v}" for k, v in rows.items()
    )


@dataclass
class RegressionReport:
    """Scores and the per-point uncertainty split of a regression predictive (:func:`regression_report`)."""

    rmse: float
    test_ll: float
    crps: float
    coverage: dict[float, float]
    miscalibration_area: float
    num_samples: int
    rmse_standard: float | None
    mean: torch.Tensor = field(repr=False)
    epistemic_variance: torch.Tensor = field(repr=False)
    aleatoric_variance: torch.Tensor = field(repr=False)
    log_likelihood: torch.Tensor = field(repr=False)
    crps_points: torch.Tensor | None = field(default=None, repr=False)  # each point's CRPS
    pit: torch.Tensor | None = field(default=None, repr=False)  # each point's PIT value

    @property
    def total_variance(self) -> torch.Tensor:
        return self.epistemic_variance + self.aleatoric_variance

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "rmse": self.rmse,
            "rmse_standard": self.rmse_standard,
            "test_ll": self.test_ll,
            "crps": self.crps,
            "miscalibration_area": self.miscalibration_area,
            "epistemic_sd": float(self.epistemic_variance.mean().sqrt()),
            "aleatoric_sd": float(self.aleatoric_variance.mean().sqrt()),
            "num_samples": self.num_samples,
        }
        out.update({f"coverage_{round(100 * k)}": v for k, v in self.coverage.items()})
        return out

    def __str__(self) -> str:
        return _table({k: v for k, v in self.as_dict().items() if v is not None})


@dataclass
class LikelihoodReport:
    """The scores of a predictive whose distribution has neither class probabilities nor a mean and
    a variance (a user's two-headed distribution, say): its test log-likelihood (each point's
    log-mean-exp over the draws of ``log p(y | draw)``, averaged), and, where the distribution has
    a mean, the RMSE of the MC predictive mean (the draws' means averaged) against the targets."""

    test_ll: float
    num_samples: int
    rmse: float | None
    log_likelihood: torch.Tensor = field(repr=False)  # each point's MC predictive log-likelihood
    mean: torch.Tensor | None = field(default=None, repr=False)  # the MC predictive mean, if any

    def as_dict(self) -> dict[str, Any]:
        return {"test_ll": self.test_ll, "rmse": self.rmse, "num_samples": self.num_samples}

    def __str__(self) -> str:
        return _table({k: v for k, v in self.as_dict().items() if v is not None})


def regression_report(
    pred: Predictions,
    site: str | None = None,
    standard: Predictions | None = None,
    levels: Sequence[float] = LEVELS,
) -> RegressionReport:
    r"""Score a regression predictive: RMSE, test log-likelihood, CRPS, calibration, uncertainty split.

    The predictive is the mixture :math:`\frac1T\sum_t p(y \mid x, \omega_t)`; its mean is
    the MC-dropout mean (paper [1], eq. 11); the **epistemic** variance is the variance of
    the per-draw means, the **aleatoric** variance the mean of the per-draw variances
    (:math:`\tau^{-1}`, or a heteroscedastic :math:`\sigma^2(x)`), and their sum is the
    predictive variance (paper [1], §4; [2], §2). The test log-likelihood is
    :math:`\frac1N\sum_n \log \frac1T \sum_t p(y_n \mid x_n, \omega_t)` by log-sum-exp
    (eq. 13 for a Gaussian likelihood). ``standard`` adds the RMSE of standard dropout.
    """
    name = site_of(pred, site)
    if name in pred.probs or name not in pred.means:
        kind = pred.distributions[name].__name__
        raise ValueError(
            f"site '{name}' has a {kind} likelihood: use classification_report, not regression_report"
        )
    if name not in pred.observed or name not in pred.log_likelihood:
        raise ValueError(f"site '{name}' has no observations: pass the targets to predict()")
    means, variances, y = pred.means[name], pred.variances[name], pred.observed[name]
    t = means.shape[0]
    if t < 2:
        raise ValueError(f"a regression report needs at least 2 draws to estimate a variance, got {t}")
    mean = means.mean(0)
    log_lik = log_mean_exp(pred.log_likelihood[name], dim=0)
    per_point = crps(means, y, variances)
    return RegressionReport(
        rmse=rmse(mean, y),
        test_ll=float(log_lik.mean()),
        crps=float(per_point.mean()),
        coverage=coverage(means, y, variances, levels),
        miscalibration_area=miscalibration_area(means, y, variances),
        num_samples=t,
        rmse_standard=None if standard is None else rmse(standard.means[name][0], y),
        mean=mean,
        epistemic_variance=means.var(0, unbiased=False),
        aleatoric_variance=variances.mean(0),
        log_likelihood=log_lik,
        crps_points=per_point,
        pit=pit(means, y, variances),
    )


@dataclass
class ClassificationReport:
    """Scores and per-point uncertainties of a classification predictive (:func:`classification_report`)."""

    accuracy: float
    nll: float
    brier: float
    ece: float
    misclassification_auroc: dict[str, float]
    num_samples: int
    accuracy_standard: float | None
    probs: torch.Tensor = field(repr=False)  # the MC predictive [N, C] (or [N, *positions, C])
    scores: dict[str, torch.Tensor] = field(repr=False)  # per-point (per-element) uncertainty scores
    reliability: Any = field(repr=False)
    # a class per position of a point (tokens, pixels): the scalar scores are over the elements,
    # ``per_item`` holds each point's mean over its positions (accuracy, nll and each score)
    positions: tuple[int, ...] = ()
    per_item: dict[str, torch.Tensor] = field(default_factory=dict, repr=False)
    log_likelihood: torch.Tensor | None = field(default=None, repr=False)  # per point (element)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "accuracy": self.accuracy,
            "accuracy_standard": self.accuracy_standard,
            "nll": self.nll,
            "brier": self.brier,
            "ece": self.ece,
            "num_samples": self.num_samples,
        }
        if self.positions:
            out["positions"] = "x".join(map(str, self.positions))
        out.update({f"misclassification_auroc_{k}": v for k, v in self.misclassification_auroc.items()})
        return out

    def __str__(self) -> str:
        return _table({k: v for k, v in self.as_dict().items() if v is not None})


def uncertainty_scores(probs: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per-point scores from sampled probabilities ``[T, N, C]``: higher means more uncertain. With
    a class per position (``[T, N, *positions, C]``: tokens, pixels), each point's mean over its
    positions."""
    if probs.dim() > 3:
        flat = uncertainty_scores(probs.reshape(probs.shape[0], -1, probs.shape[-1]))
        return {k: v.reshape(probs.shape[1], -1).mean(1) for k, v in flat.items()}
    scores = {
        "predictive_entropy": predictive_entropy(probs),
        "max_prob": 1 - probs.mean(0).max(-1).values,
    }
    if probs.shape[0] > 1:
        scores["mutual_information"] = mutual_information(probs)
        scores["variation_ratio"] = variation_ratio(probs)
    return scores


def classification_report(
    pred: Predictions,
    site: str | None = None,
    standard: Predictions | None = None,
    n_bins: int = 15,
) -> ClassificationReport:
    r"""Score a classification predictive :math:`\bar p = \frac1T \sum_t p_t`.

    Accuracy, NLL (:math:`-\log \frac1T\sum_t p(y_n \mid x_n, \omega_t)` by log-sum-exp),
    Brier score, ECE (``n_bins`` equal-width bins), and how well each uncertainty score
    (predictive entropy, mutual information, variation ratio, 1 - max probability)
    separates misclassified from correct points (AUROC, ties counted one half).
    """
    name = _classification_site(pred, site)
    probs, labels = pred.probs[name], pred.observed[name]
    positions = tuple(probs.shape[2:-1])  # a class per token or pixel: scored per element
    flat, flat_labels = probs.reshape(probs.shape[0], -1, probs.shape[-1]), labels.reshape(-1)
    diagram = reliability_diagram(flat, flat_labels, n_bins)
    mean = flat.mean(0)
    wrong = mean.argmax(-1) != flat_labels
    scores = uncertainty_scores(flat)
    separation = {}
    if bool(wrong.any()) and bool((~wrong).any()):
        separation = {k: auroc(v[wrong], v[~wrong]) for k, v in scores.items()}
    chosen = flat.gather(-1, flat_labels.long().expand(flat.shape[0], -1).unsqueeze(-1)).squeeze(-1)
    nll = -log_mean_exp(chosen.log(), dim=0)
    per_item = _per_item(positions, len(labels), {"accuracy": (~wrong).double(), "nll": nll, **scores})
    return ClassificationReport(
        accuracy=float((~wrong).double().mean()),
        nll=float(nll.mean()),
        brier=brier_score(flat, flat_labels),
        ece=diagram.ece,
        misclassification_auroc=separation,
        num_samples=probs.shape[0],
        accuracy_standard=None
        if standard is None
        else float((standard.probs[name][0].reshape(mean.shape).argmax(-1) == flat_labels).double().mean()),
        probs=mean.reshape(*labels.shape, mean.shape[-1]),
        scores={k: v.reshape(labels.shape) for k, v in scores.items()},
        reliability=diagram,
        positions=positions,
        per_item=per_item,
        log_likelihood=-nll.reshape(labels.shape),
    )


def _classification_site(pred: Predictions, site: str | None) -> str:
    name = site_of(pred, site)
    if name not in pred.probs:
        kind = pred.distributions[name].__name__
        raise ValueError(
            f"site '{name}' has a {kind} likelihood: use regression_report, not classification_report"
        )
    if name not in pred.observed:
        raise ValueError(f"site '{name}' has no observations: pass the labels to predict()")
    return name


def _per_item(positions: tuple, points: int, values: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Each point's mean over its positions of each per-element value (none without positions)."""
    return {k: v.reshape(points, -1).mean(1) for k, v in values.items()} if positions else {}


def ood_detection(
    pred_in: Predictions | torch.Tensor,
    pred_out: Predictions | torch.Tensor,
    site: str | None = None,
) -> dict[str, dict[str, float]]:
    """AUROC and AUPR of each uncertainty score at telling out-of-distribution inputs (positives)
    from in-distribution ones. Accepts :class:`Predictions` or sampled probabilities ``[T, N, C]``."""

    def probs_of(p: Predictions | torch.Tensor) -> torch.Tensor:
        if isinstance(p, Predictions):
            name = site_of(p, site)
            if name not in p.probs:
                raise ValueError(
                    f"site '{name}' is not a classification likelihood: OOD scores need class probabilities"
                )
            return p.probs[name]
        return p

    s_in, s_out = uncertainty_scores(probs_of(pred_in)), uncertainty_scores(probs_of(pred_out))
    return {k: {"auroc": auroc(s_out[k], s_in[k]), "aupr": aupr(s_out[k], s_in[k])} for k in s_in}
