r"""``evaluate(model, guide, x, y)``: the report that fits the likelihood, in memory bounded by
one chunk of draws.

The draws are made ``chunk_size`` at a time and folded into running scores
(:mod:`.streaming`), so the peak memory is that of one chunk, whatever ``num_samples`` is
(``benchmarks/evaluate_memory.py``). Every score is the one :func:`regression_report` /
:func:`classification_report` computes from all draws held in memory, except CRPS's pair term
when the draws span several chunks: it is then estimated without bias from about
``crps_pairs`` pairs of distinct draws per point (exact within one chunk).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from ..infer.divergence import DivergenceError, diagnose
from ..ops import is_positive_int
from ..prediction.draws import Predictions
from ..prediction.predictive import predict_chunks, predict_standard
from .classification import brier_score, reliability_diagram
from .ranking import auroc
from .regression import miscalibration_area_from_pit
from .reports import LEVELS, ClassificationReport, LikelihoodReport, RegressionReport, site_of
from .streaming import CategoricalScores, GaussianMixtureScores, LogMeanExp

__all__ = ["evaluate"]


class _Regression:
    def __init__(self, pred: Predictions, name: str, pair_rolls: int) -> None:
        if name not in pred.observed or name not in pred.log_likelihood:
            raise ValueError(f"site '{name}' has no observations: pass the targets to evaluate()")
        self.y = pred.observed[name].to(pred.means[name].dtype)  # integer targets are numbers too
        self.scores, self.log_lik, self.rolls = GaussianMixtureScores(self.y), LogMeanExp(), pair_rolls

    def update(self, pred: Predictions, name: str) -> None:
        self.scores.update(pred.means[name], pred.variances[name], self.rolls)
        self.log_lik.update(pred.log_likelihood[name])

    def report(self, standard: Predictions | None, name: str) -> RegressionReport:
        s, t = self.scores, self.scores.count
        if t < 2:
            raise ValueError(f"a regression report needs at least 2 draws to estimate a variance, got {t}")
        log_lik, u = self.log_lik.value(), s.pit()
        mean = s.mean.to(self.y.dtype)
        return RegressionReport(
            rmse=float((mean - self.y).pow(2).mean().sqrt()),
            test_ll=float(log_lik.mean()),
            crps=float(s.crps().mean()),
            coverage={float(k): float(((u - 0.5).abs() <= k / 2).double().mean()) for k in LEVELS},
            miscalibration_area=miscalibration_area_from_pit(u),
            num_samples=t,
            rmse_standard=None
            if standard is None
            else float((standard.means[name][0] - self.y).pow(2).mean().sqrt()),
            mean=mean,
            epistemic_variance=s.epistemic_variance().to(self.y.dtype),
            aleatoric_variance=s.aleatoric_variance().to(self.y.dtype),
            log_likelihood=log_lik.to(self.y.dtype),
            crps_points=s.crps().to(self.y.dtype),
            pit=u,
        )


class _Likelihood:
    """A site with neither class probabilities nor a mean and a variance: its log-likelihood, and the
    MC predictive mean where the distribution has a mean."""

    def __init__(self, pred: Predictions, name: str) -> None:
        if name not in pred.observed or name not in pred.log_likelihood:
            raise ValueError(f"site '{name}' has no observations: pass the targets to evaluate()")
        self.y, self.log_lik = pred.observed[name], LogMeanExp()
        self.total: torch.Tensor | None = None
        self.count = 0

    def update(self, pred: Predictions, name: str) -> None:
        self.log_lik.update(pred.log_likelihood[name])
        draws = pred.log_likelihood[name].shape[0]
        self.count += draws
        if name in pred.means:
            part = pred.means[name].double().sum(0)
            self.total = part if self.total is None else self.total + part

    def report(self, standard: Predictions | None, name: str) -> LikelihoodReport:
        log_lik = self.log_lik.value()
        mean = None if self.total is None else (self.total / self.count).to(torch.get_default_dtype())
        fits = mean is not None and mean.shape == self.y.shape
        rmse = (
            float((mean - self.y.to(mean.dtype)).pow(2).mean().sqrt()) if fits and mean is not None else None
        )
        return LikelihoodReport(float(log_lik.mean()), self.count, rmse, log_lik, mean)


class _Classification:
    """A class per point, or per position of a point (a token, a pixel): probabilities
    ``[T, N, *positions, C]``, scored per element with a summary per point (``per_item``)."""

    def __init__(self, pred: Predictions, name: str) -> None:
        if name not in pred.observed:
            raise ValueError(f"site '{name}' has no observations: pass the labels to evaluate()")
        probs = pred.probs[name]
        labels = pred.observed[name]
        labels = labels if labels.is_floating_point() else labels.long()  # int32 and bool labels too
        self.shape, self.positions = tuple(labels.shape), tuple(probs.shape[2:-1])
        self.labels = labels.reshape(-1)  # one element per point and position
        self.scores = CategoricalScores(self.labels, probs.shape[-1], self.labels.numel())

    def update(self, pred: Predictions, name: str) -> None:
        probs = pred.probs[name]
        self.scores.update(probs.reshape(probs.shape[0], -1, probs.shape[-1]))

    def _uncertainty(self) -> dict[str, torch.Tensor]:
        s = self.scores
        found = {"predictive_entropy": s.predictive_entropy(), "max_prob": 1 - s.mean_probs.max(-1).values}
        if s.count > 1:
            found |= {"mutual_information": s.mutual_information(), "variation_ratio": s.variation_ratio()}
        return found

    def _per_item(self, right: torch.Tensor, uncertainty: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Each point's mean over its positions (none without positions)."""
        if not self.positions:
            return {}
        parts = {"accuracy": right.double(), "nll": -self.scores.log_likelihood(), **uncertainty}
        return {k: v.reshape(self.shape[0], -1).mean(1) for k, v in parts.items()}

    def report(self, standard: Predictions | None, name: str) -> ClassificationReport:
        s, labels = self.scores, self.labels.cpu()
        mean = s.mean_probs
        wrong = mean.argmax(-1) != labels
        uncertainty = self._uncertainty()
        separation = {}
        if bool(wrong.any()) and bool((~wrong).any()):
            separation = {k: auroc(v[wrong], v[~wrong]) for k, v in uncertainty.items()}
        diagram = reliability_diagram(mean, labels)
        accuracy_standard = None
        if standard is not None:
            best = standard.probs[name][0].reshape(-1, mean.shape[-1]).argmax(-1).cpu()
            accuracy_standard = float((best == labels).double().mean())
        return ClassificationReport(
            accuracy=float((~wrong).double().mean()),
            nll=float(-s.log_likelihood().mean()),
            brier=brier_score(mean, labels),
            ece=diagram.ece,
            misclassification_auroc=separation,
            num_samples=s.count,
            accuracy_standard=accuracy_standard,
            probs=mean.reshape(*self.shape, mean.shape[-1]),
            scores={k: v.reshape(self.shape) for k, v in uncertainty.items()},
            reliability=diagram,
            positions=self.positions,
            per_item=self._per_item(~wrong, uncertainty),
            log_likelihood=s.log_likelihood().reshape(self.shape),
        )


def evaluate(
    model: Callable,
    guide: Any,
    *args: Any,
    num_samples: int = 1000,
    chunk_size: int | None = 100,
    site: str | None = None,
    crps_pairs: int = 100_000,
    parallel: bool = True,
    **kwargs: Any,
) -> RegressionReport | ClassificationReport:
    """Predict with ``num_samples`` MC-dropout draws on ``(*args, **kwargs)`` (observations
    included), ``chunk_size`` at a time, and return the report that fits the likelihood.

    Usage:

        report = evaluate(model, guide, x_test, y_test)
        print(report)            # RMSE, test LL, CRPS, coverage ... or accuracy, NLL, ECE ...
    """
    if not is_positive_int(num_samples):
        raise ValueError(f"evaluate: num_samples must be a positive int, got {num_samples!r}")
    chunk = num_samples if chunk_size is None else chunk_size
    if not is_positive_int(chunk):
        raise ValueError(f"evaluate: chunk_size must be a positive int or None, got {chunk_size!r}")
    if not is_positive_int(crps_pairs):
        raise ValueError(f"evaluate: crps_pairs must be a positive int, got {crps_pairs!r}")
    rolls = max(1, math.ceil(crps_pairs / num_samples))
    scores: _Regression | _Classification | _Likelihood | None = None
    name = ""
    draws: dict[str, Any] = {"num_samples": num_samples, "chunk_size": chunk, "return_sites": ()}
    draws["parallel"] = parallel
    chunks = predict_chunks(model, guide, *args, **draws, **kwargs)
    for pred in chunks:
        if scores is None:
            name = site_of(pred, site)
            scores = _scores_of(pred, name, rolls)
        scores.update(pred, name)
    assert scores is not None
    # standard dropout: one pass at the expected weights (unbatched with parallel=False)
    standard = (
        predict_standard(model, guide, *args, parallel=parallel, **kwargs)
        if hasattr(guide, "median")
        else None
    )
    return _finite(scores.report(standard, name), args, kwargs)


def _scores_of(pred: Predictions, name: str, rolls: int) -> _Regression | _Classification | _Likelihood:
    """The scores that fit the site's distribution: its class probabilities, its mean and variance,
    or (neither: a user's distribution) its log-likelihood."""
    if name in pred.probs:
        return _Classification(pred, name)
    if name in pred.means and name in pred.variances:
        return _Regression(pred, name, rolls)
    return _Likelihood(pred, name)


def _finite(report: Any, args: tuple, kwargs: dict) -> Any:
    """The report, if its headline scores are finite; else an error saying why they are not."""
    headline = (
        ("rmse", "test_ll")
        if isinstance(report, RegressionReport)
        else ("test_ll",)
        if isinstance(report, LikelihoodReport)
        else ("accuracy", "nll")
    )
    values = {k: getattr(report, k) for k in headline}
    if all(math.isfinite(v) for v in values.values()):
        return report
    shown = ", ".join(f"{k}={v}" for k, v in values.items())
    raise DivergenceError(f"evaluate: the scores are not finite ({shown}); {diagnose(args, kwargs, [])}")
