r"""One report from the reports of the batches of a data set (a ``DataLoader`` scored batch by batch).

Every score of :func:`~pyro_dropout.metrics.evaluate` is a mean over points of a per-point value,
or a function of per-point values (ECE of the points' predictive probabilities, coverage and the
miscalibration area of their PIT values, the AUROC of their uncertainty scores), so the report of
the whole set is computed from the batches' per-point values: the same report as one call on all
the points with the same draws, in memory of per-point values only (no inputs, no draws).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from .classification import brier_score, reliability_diagram
from .ranking import auroc
from .regression import miscalibration_area_from_pit
from .reports import LEVELS, ClassificationReport, LikelihoodReport, RegressionReport

__all__ = ["merge_reports"]


def _weighted(values: Sequence[float | None], counts: Sequence[int], root: bool = False) -> float | None:
    """The count-weighted mean of the batches' values (of squares: an RMSE), None if any is None."""
    known = [float(v) for v in values if v is not None]
    if len(known) != len(values):
        return None
    total = sum(c * (v**2 if root else v) for v, c in zip(known, counts, strict=True))
    mean = total / sum(counts)
    return math.sqrt(mean) if root else mean


def _regression(reports: Sequence[RegressionReport], targets: torch.Tensor) -> RegressionReport:
    cat = lambda field: torch.cat([getattr(r, field) for r in reports])  # noqa: E731
    mean, log_lik, u = cat("mean"), cat("log_likelihood"), cat("pit")
    counts = [len(r.mean) for r in reports]
    return RegressionReport(
        rmse=float((mean - targets.to(mean.dtype)).pow(2).mean().sqrt()),
        test_ll=float(log_lik.mean()),
        crps=float(cat("crps_points").mean()),
        coverage={float(k): float(((u - 0.5).abs() <= k / 2).double().mean()) for k in LEVELS},
        miscalibration_area=miscalibration_area_from_pit(u),
        num_samples=reports[0].num_samples,
        rmse_standard=_weighted([r.rmse_standard for r in reports], counts, root=True),
        mean=mean,
        epistemic_variance=cat("epistemic_variance"),
        aleatoric_variance=cat("aleatoric_variance"),
        log_likelihood=log_lik,
        crps_points=cat("crps_points"),
        pit=u,
    )


def _classification(reports: Sequence[ClassificationReport], targets: torch.Tensor) -> ClassificationReport:
    probs = torch.cat([r.probs for r in reports])
    flat, labels = probs.reshape(-1, probs.shape[-1]), targets.reshape(-1).long().to(probs.device)
    log_lik = torch.cat([r.log_likelihood.reshape(-1) for r in reports if r.log_likelihood is not None])
    scores = {k: torch.cat([r.scores[k] for r in reports]) for k in reports[0].scores}
    wrong = flat.argmax(-1) != labels
    flat_scores = {k: v.reshape(-1) for k, v in scores.items()}
    separation = {}
    if bool(wrong.any()) and bool((~wrong).any()):
        separation = {k: auroc(v[wrong], v[~wrong]) for k, v in flat_scores.items()}
    counts = [r.probs[..., 0].numel() for r in reports]
    return ClassificationReport(
        accuracy=float((~wrong).double().mean()),
        nll=float(-log_lik.mean()),
        brier=brier_score(flat, labels),
        ece=(diagram := reliability_diagram(flat, labels)).ece,
        misclassification_auroc=separation,
        num_samples=reports[0].num_samples,
        accuracy_standard=_weighted([r.accuracy_standard for r in reports], counts),
        probs=probs,
        scores=scores,
        reliability=diagram,
        positions=reports[0].positions,
        per_item={k: torch.cat([r.per_item[k] for r in reports]) for k in reports[0].per_item},
        log_likelihood=log_lik.reshape(targets.shape),
    )


def _likelihood(reports: Sequence[LikelihoodReport], targets: torch.Tensor) -> LikelihoodReport:
    log_lik = torch.cat([r.log_likelihood for r in reports])
    means = [r.mean for r in reports]
    mean = torch.cat([m for m in means if m is not None]) if all(m is not None for m in means) else None
    fits = mean is not None and mean.shape == targets.shape
    rmse = float((mean - targets.to(mean.dtype)).pow(2).mean().sqrt()) if fits and mean is not None else None
    return LikelihoodReport(float(log_lik.mean()), reports[0].num_samples, rmse, log_lik, mean)


def merge_reports(reports: Sequence[Any], targets: torch.Tensor) -> Any:
    """The report of all the points of ``reports`` (in order), whose targets are ``targets``."""
    if not reports:
        raise ValueError("merge_reports: no reports to merge")
    if isinstance(reports[0], RegressionReport):
        return _regression(reports, targets)
    if isinstance(reports[0], LikelihoodReport):
        return _likelihood(reports, targets)
    return _classification(reports, targets)
