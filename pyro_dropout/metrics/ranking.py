r"""Separating two sets of scores: AUROC, AUPR and the FPR at 95% TPR, computed exactly with ties."""

from __future__ import annotations

import math

import torch

from ._checks import as_tensor, check_finite

__all__ = ["aupr", "auroc", "average_ranks", "fpr_at_tpr"]


def _scores(pos: object, neg: object) -> tuple[torch.Tensor, torch.Tensor]:
    p = check_finite(as_tensor(pos, "scores_pos"), "scores_pos").flatten().double()
    n = check_finite(as_tensor(neg, "scores_neg"), "scores_neg").flatten().double().to(p.device)
    if p.numel() == 0 or n.numel() == 0:
        raise ValueError("auroc/aupr/fpr_at_tpr need at least one positive and one negative score")
    return p, n


def average_ranks(x: torch.Tensor) -> torch.Tensor:
    """1-based ranks of ``x`` (ascending), tied values sharing their average rank."""
    order = torch.argsort(x, stable=True)
    sorted_x = x[order]
    _, inverse, counts = torch.unique_consecutive(sorted_x, return_inverse=True, return_counts=True)
    ends = torch.cumsum(counts, 0).double()
    average = ends - (counts.double() - 1) / 2  # mean of ranks end-count+1 .. end
    ranks = torch.empty_like(x, dtype=torch.float64)
    ranks[order] = average[inverse]
    return ranks


def auroc(scores_pos: object, scores_neg: object) -> float:
    r"""Area under the ROC curve: :math:`P(s^+ > s^-) + \tfrac12 P(s^+ = s^-)`.

    The Mann-Whitney statistic computed from tie-averaged ranks, exact for any ties.
    Higher scores should indicate the positive class (e.g. misclassified, or
    out-of-distribution inputs scored by their uncertainty).
    """
    p, n = _scores(scores_pos, scores_neg)
    ranks = average_ranks(torch.cat([p, n]))
    n_pos, n_neg = p.numel(), n.numel()
    return float((ranks[:n_pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def aupr(scores_pos: object, scores_neg: object) -> float:
    r"""Area under the precision-recall curve (average precision), positives = ``scores_pos``.

    :math:`\sum_k (R_k - R_{k-1}) P_k` over the distinct score thresholds in decreasing
    order; tied scores enter at one threshold together, so the value does not depend on
    how ties are ordered.
    """
    p, n = _scores(scores_pos, scores_neg)
    scores = torch.cat([p, n])
    is_pos = torch.cat([torch.ones_like(p), torch.zeros_like(n)])
    order = torch.argsort(scores, descending=True, stable=True)
    scores, is_pos = scores[order], is_pos[order]
    _, counts = torch.unique_consecutive(scores, return_counts=True)
    ends = torch.cumsum(counts, 0) - 1  # last index of each tie group
    tp = torch.cumsum(is_pos, 0)[ends]
    predicted = (ends + 1).double()
    precision = tp / predicted
    recall = tp / p.numel()
    previous = torch.cat([recall.new_zeros(1), recall[:-1]])
    return float(((recall - previous) * precision).sum())


def fpr_at_tpr(scores_pos: object, scores_neg: object, tpr: float = 0.95) -> float:
    r"""The false-positive rate at the threshold that first flags a share ``tpr`` of the positives
    (FPR at 95% TPR, the OOD literature's usual operating point): the threshold :math:`t` is the
    :math:`\lceil \text{tpr} \cdot n^+ \rceil`-th highest positive score, and the rate is the
    share of negatives with a score of at least :math:`t` (ties with it counted as flagged)."""
    if not isinstance(tpr, float | int) or isinstance(tpr, bool) or not 0 < tpr <= 1:
        raise ValueError(f"fpr_at_tpr: tpr must be a number in (0, 1], got {tpr!r}")
    p, n = _scores(scores_pos, scores_neg)
    k = math.ceil(tpr * p.numel() - 1e-9)
    threshold = torch.sort(p, descending=True).values[k - 1]
    return float((n >= threshold).double().mean())
