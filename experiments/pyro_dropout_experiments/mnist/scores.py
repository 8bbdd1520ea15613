"""Every score of the OOD comparison from sampled class probabilities ``[T, N, C]``."""

from __future__ import annotations

from typing import Any

import torch

from pyro_dropout.metrics import (
    accuracy,
    adaptive_ece,
    aupr,
    aurc,
    auroc,
    brier_score,
    classwise_ece,
    expected_calibration_error,
    mutual_information,
    negative_log_likelihood,
    predictive_entropy,
    variation_ratio,
)

__all__ = ["SCORES", "method_scores", "uncertainty"]

SCORES = ("predictive_entropy", "mutual_information", "variation_ratio", "max_softmax")


# scores of the spread between draws: 0 everywhere for one pass, so their AUROC is "n/a" there
_BETWEEN_DRAWS = ("mutual_information", "variation_ratio")


def uncertainty(probs: torch.Tensor) -> dict[str, torch.Tensor]:
    """Each score per point, higher meaning less certain. One pass (``T = 1``, the standard
    network): mutual information and variation ratio are 0 everywhere."""
    return {
        "predictive_entropy": predictive_entropy(probs),
        "mutual_information": mutual_information(probs),
        "variation_ratio": variation_ratio(probs),
        "max_softmax": 1 - probs.mean(0).max(-1).values,
    }


def method_scores(probs: torch.Tensor, labels: torch.Tensor, ood: dict[str, torch.Tensor]) -> dict[str, Any]:
    """Accuracy, NLL, Brier, ECE (equal-width, adaptive, classwise), AURC, misclassification
    AUROC per score, and AUROC / AUPR per OOD set and score (OOD images the positives)."""
    own = uncertainty(probs)
    scores = SCORES if probs.shape[0] > 1 else tuple(k for k in SCORES if k not in _BETWEEN_DRAWS)
    wrong = probs.mean(0).argmax(-1) != labels
    separable = 0 < int(wrong.sum()) < len(wrong)
    out: dict[str, Any] = {
        "accuracy": accuracy(probs, labels),
        "nll": negative_log_likelihood(probs, labels),
        "brier": brier_score(probs, labels),
        "ece": expected_calibration_error(probs, labels),
        "adaptive_ece": adaptive_ece(probs, labels),
        "classwise_ece": classwise_ece(probs, labels),
        "aurc": aurc(probs, labels, own["max_softmax"]),
        # None where every test image is right (or every one wrong): nothing to separate
        "misclassification_auroc": {
            k: auroc(own[k][wrong], own[k][~wrong]) if k in scores and separable else None for k in SCORES
        },
        "auroc": {},
        "aupr": {},
    }
    for name, other in ood.items():
        theirs = uncertainty(other)
        out["auroc"][name] = {k: auroc(theirs[k], own[k]) if k in scores else None for k in SCORES}
        out["aupr"][name] = {k: aupr(theirs[k], own[k]) if k in scores else None for k in SCORES}
    return out
