r"""Calibration beyond equal-width ECE, and selective prediction.

- :func:`adaptive_ece`: ECE over equal-mass bins of the confidence (each bin the same number of
  points), less sensitive to the empty bins of a confident classifier;
- :func:`classwise_ece`: the ECE of every class probability, not only of the top one, averaged
  over classes (Kull et al., 2019);
- :func:`risk_coverage` and :func:`aurc`: the error rate among the points kept when the least
  certain are refused, and the area under that curve (Geifman & El-Yaniv, 2017);
- :func:`fit_temperature`: the temperature :math:`T` minimising the NLL of ``softmax(logits / T)``
  on validation data (Guo et al., 2017).

``probs`` is a predictive ``[N, C]`` or sampled probabilities ``[T, N, C]`` (averaged over ``T``).
"""

from __future__ import annotations

import torch

from ..ops import log_mean_exp
from ._checks import as_tensor, check_probs, labels_for

__all__ = ["adaptive_ece", "aurc", "classwise_ece", "fit_temperature", "risk_coverage"]


def _predictive(probs: object) -> torch.Tensor:
    p = probs if isinstance(probs, torch.Tensor) else torch.as_tensor(probs)
    return check_probs(p, "probs", draws=False) if p.dim() == 2 else check_probs(p, "probs").mean(0)


def _binned_gap(confidence: torch.Tensor, correct: torch.Tensor, bins: torch.Tensor) -> float:
    """The sum over bins of the gap between the share correct and the mean confidence, weighted by
    the share of points in the bin (a bin's sums over N, so the gap of sums over N is that)."""
    n_bins = int(bins.max()) + 1
    conf = torch.zeros(n_bins, dtype=torch.float64, device=bins.device).index_add_(0, bins, confidence)
    acc = torch.zeros(n_bins, dtype=torch.float64, device=bins.device).index_add_(0, bins, correct)
    return float((acc - conf).abs().sum() / confidence.numel())


def adaptive_ece(probs: object, labels: object, n_bins: int = 15) -> float:
    """ECE with ``n_bins`` equal-mass bins of the top-class confidence."""
    p = _predictive(probs)
    y = labels_for(labels, p)
    confidence, top = p.double().max(-1)
    order = confidence.argsort()
    bins = torch.empty_like(order)
    bins[order] = torch.arange(len(order), device=order.device) * n_bins // len(order)
    return _binned_gap(confidence, (top == y).double(), bins)


def classwise_ece(probs: object, labels: object, n_bins: int = 15) -> float:
    """The equal-width ECE of each class's probability against the indicator of that class,
    averaged over the classes."""
    p = _predictive(probs).double()
    y = labels_for(labels, p)
    gaps = []
    for c in range(p.shape[1]):
        bins = (p[:, c] * n_bins).long().clamp_max(n_bins - 1)
        gaps.append(_binned_gap(p[:, c], (y == c).double(), bins))
    return sum(gaps) / len(gaps)


def risk_coverage(
    probs: object, labels: object, uncertainty: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(coverage, risk)``: keeping the ``k`` most certain points (by ``uncertainty``, default
    one minus the top-class probability), the share kept and their error rate, for k = 1..N."""
    p = _predictive(probs)
    y = labels_for(labels, p)
    u = 1 - p.max(-1).values if uncertainty is None else as_tensor(uncertainty, "uncertainty").to(p.device)
    if u.shape != y.shape:
        raise ValueError(f"risk_coverage: uncertainty has shape {tuple(u.shape)}, expected {tuple(y.shape)}")
    errors = (p.argmax(-1) != y).double()[u.argsort(stable=True)]
    kept = torch.arange(1, len(y) + 1, dtype=torch.float64, device=y.device)
    return kept / len(y), errors.cumsum(0) / kept


def aurc(probs: object, labels: object, uncertainty: torch.Tensor | None = None) -> float:
    """The area under the risk-coverage curve (lower is better; the mean of the risks)."""
    _, risk = risk_coverage(probs, labels, uncertainty)
    return float(risk.mean())


def fit_temperature(logits: torch.Tensor, labels: object, steps: int = 100) -> float:
    """The temperature T minimising the NLL of the predictive made from ``logits / T``.

    ``logits`` ``[N, C]``: one network, the NLL of ``softmax(logits / T)`` (Guo et al. 2017).
    ``logits`` ``[S, N, C]``: S stochastic passes (MC dropout), the NLL of the mean of their
    ``softmax(logits_s / T)``, the predictive that is then scored; one T for every pass.
    """
    if logits.dim() not in (2, 3):
        raise ValueError(f"fit_temperature: logits must be [N, C] or [S, N, C], got {tuple(logits.shape)}")
    y = labels_for(labels, logits)
    log_t = torch.zeros((), dtype=torch.float64, device=logits.device, requires_grad=True)
    z = logits.detach().double()
    z = z if z.dim() == 3 else z.unsqueeze(0)
    optimiser = torch.optim.LBFGS([log_t], lr=0.5, max_iter=steps, line_search_fn="strong_wolfe")
    rows = torch.arange(z.shape[-2], device=z.device)

    def closure() -> torch.Tensor:
        optimiser.zero_grad()
        log_p = (z / log_t.exp()).log_softmax(-1)[:, rows, y]  # [S, N]
        loss = -log_mean_exp(log_p, dim=0).mean()
        loss.backward()
        return loss

    optimiser.step(closure)
    return float(log_t.detach().exp())
