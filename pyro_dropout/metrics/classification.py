r"""Uncertainty and scores from sampled class probabilities ``probs[t, n, c]``."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..ops import is_positive_int
from ._checks import check_probs, labels_for

__all__ = [
    "ReliabilityDiagram",
    "accuracy",
    "brier_score",
    "entropy",
    "expected_calibration_error",
    "mutual_information",
    "negative_log_likelihood",
    "predictive_entropy",
    "reliability_diagram",
    "variation_ratio",
]


def entropy(p: torch.Tensor) -> torch.Tensor:
    r""":math:`-\sum_c p_c \log p_c` over the last dim (``0 log 0 = 0``)."""
    return -torch.special.xlogy(p, p).sum(-1)


def _mean_probs(probs: object) -> torch.Tensor:
    """``[T, N, C]`` -> ``[N, C]``; ``[N, C]`` passes through (a single predictive)."""
    p = probs if isinstance(probs, torch.Tensor) else torch.as_tensor(probs)
    if p.dim() == 2:
        return check_probs(p, "probs", draws=False)
    return check_probs(p, "probs").mean(0)


def predictive_entropy(probs: object) -> torch.Tensor:
    r"""Entropy of the MC predictive :math:`\bar p = \frac1T \sum_t p_t`, per point: total uncertainty."""
    return entropy(check_probs(probs).mean(0))


def mutual_information(probs: object) -> torch.Tensor:
    r"""BALD: :math:`\mathcal{H}[\bar p] - \frac1T\sum_t \mathcal{H}[p_t]`, per point: epistemic uncertainty.

    The mutual information between the label and the weights; non-negative by Jensen's
    inequality (float round-off below zero is clipped).
    """
    p = check_probs(probs)
    return (entropy(p.mean(0)) - entropy(p).mean(0)).clamp_min(0)


def variation_ratio(probs: object) -> torch.Tensor:
    r""":math:`1 - f_{\text{mode}}/T`: the share of passes whose top class is not the modal one.

    Paper [1], §5.2: each pass votes for its arg-max class; ``f_mode`` counts the votes of
    the most frequent class.
    """
    p = check_probs(probs)
    votes = torch.nn.functional.one_hot(p.argmax(-1), p.shape[-1]).sum(0)
    return 1 - votes.max(-1).values.to(p.dtype) / p.shape[0]


def accuracy(probs: object, labels: object) -> float:
    """Accuracy of the arg-max of the (mean) predictive."""
    mean = _mean_probs(probs)
    y = labels_for(labels, mean)
    return float((mean.argmax(-1) == y).to(mean.dtype).mean())


def negative_log_likelihood(probs: object, labels: object) -> float:
    r"""Mean :math:`-\log \bar p_{y_n}` of the MC predictive (not of any single pass)."""
    mean = _mean_probs(probs)
    y = labels_for(labels, mean)
    picked = mean.gather(-1, y.unsqueeze(-1)).squeeze(-1)
    return float(-torch.log(picked).mean())


def brier_score(probs: object, labels: object) -> float:
    r"""Mean over points of :math:`\sum_c (\bar p_c - [y = c])^2`."""
    mean = _mean_probs(probs)
    y = labels_for(labels, mean)
    onehot = torch.nn.functional.one_hot(y, mean.shape[1]).to(mean.dtype)
    return float((mean - onehot).pow(2).sum(-1).mean())


@dataclass
class ReliabilityDiagram:
    """Per-bin data of a reliability diagram (equal-width confidence bins on [0, 1])."""

    bin_edges: torch.Tensor  # [B + 1]
    confidence: torch.Tensor  # [B] mean top-class confidence per bin (NaN where empty)
    accuracy: torch.Tensor  # [B] accuracy per bin (NaN where empty)
    counts: torch.Tensor  # [B] points per bin

    @property
    def ece(self) -> float:
        """Expected calibration error: the count-weighted mean |accuracy - confidence|."""
        used = self.counts > 0
        gaps = (self.accuracy[used] - self.confidence[used]).abs()
        return float((gaps * self.counts[used]).sum() / self.counts.sum())


def reliability_diagram(probs: object, labels: object, n_bins: int = 15) -> ReliabilityDiagram:
    r"""Bin points by the top-class confidence of the mean predictive :math:`\max_c \bar p_c`.

    Bins are :math:`(k/B, (k+1)/B]` (the first also holds 0), ``B = n_bins``.
    """
    if not is_positive_int(n_bins):
        raise ValueError(f"reliability_diagram: n_bins must be a positive int, got {n_bins!r}")
    mean = _mean_probs(probs).double()
    y = labels_for(labels, mean)
    confidence, predicted = mean.max(-1)
    correct = (predicted == y).double()
    index = (torch.ceil(confidence * n_bins).long() - 1).clamp(0, n_bins - 1)
    counts = torch.bincount(index, minlength=n_bins).double()
    conf_sum = torch.bincount(index, weights=confidence, minlength=n_bins)
    acc_sum = torch.bincount(index, weights=correct, minlength=n_bins)
    nan = torch.full_like(counts, float("nan"))
    return ReliabilityDiagram(
        bin_edges=torch.linspace(0, 1, n_bins + 1, dtype=torch.float64, device=counts.device),
        confidence=torch.where(counts > 0, conf_sum / counts.clamp_min(1), nan),
        accuracy=torch.where(counts > 0, acc_sum / counts.clamp_min(1), nan),
        counts=counts,
    )


def expected_calibration_error(probs: object, labels: object, n_bins: int = 15) -> float:
    r"""ECE: :math:`\sum_b \frac{|B_b|}{N}\,|\mathrm{acc}(B_b) - \mathrm{conf}(B_b)|`.

    ``probs`` are sampled probabilities ``[T, N, C]`` (or a predictive ``[N, C]``); the
    confidence is the top-class probability of their mean over ``T``; equal-width bins.
    """
    return reliability_diagram(probs, labels, n_bins).ece
