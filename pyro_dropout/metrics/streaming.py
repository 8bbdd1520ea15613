r"""Scores accumulated chunk by chunk of draws, so that memory does not grow with ``T``.

:class:`GaussianMixtureScores` scores the predictive :math:`\frac1T\sum_t\mathcal N(\mu_t, v_t)`
(paper 000, eq. 13 when :math:`v_t = \tau^{-1}`) and :class:`CategoricalScores` the predictive
:math:`\bar p = \frac1T\sum_t p_t` of a classifier. Each takes draws ``[c, *batch]`` through
:meth:`update` as they are made, for any leading batch shape (``[R, N]``: ``R`` runs of ``N``
points), and gives the same numbers as the in-memory metrics of :mod:`.regression` and
:mod:`.classification` on all ``T`` draws.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from .classification import entropy
from .regression import abs_normal_mean

__all__ = ["CategoricalScores", "GaussianMixtureScores", "LogMeanExp", "RunScores", "score_gaussian_draws"]


class LogMeanExp:
    """A running :math:`\\log \\frac1T \\sum_t e^{x_t}` over draws ``[c, *shape]`` added chunk by chunk."""

    def __init__(self) -> None:
        self.count = 0
        self.running_max: torch.Tensor | None = None
        self.running_sum: torch.Tensor | None = None

    def update(self, x: torch.Tensor) -> None:
        x = x.double()
        top = x.max(0).values
        if self.running_max is None or self.running_sum is None:
            self.running_max, self.running_sum = top, torch.zeros_like(top)
        new_max = torch.maximum(self.running_max, top)
        finite = torch.isfinite(new_max)
        shift = torch.where(finite, new_max, torch.zeros_like(new_max))
        old = torch.where(finite, torch.exp(self.running_max - shift), torch.zeros_like(shift))
        self.running_sum = self.running_sum * old + torch.exp(x - shift).sum(0)
        self.running_max = new_max
        self.count += x.shape[0]

    def value(self) -> torch.Tensor:
        if self.running_max is None or self.running_sum is None:
            raise ValueError("no draws were added")
        finite = torch.isfinite(self.running_max)
        shift = torch.where(finite, self.running_max, torch.zeros_like(self.running_max))
        return shift + self.running_sum.log() - math.log(self.count)


class GaussianMixtureScores:
    """Running sums of a Gaussian-mixture predictive at targets ``y`` ``[*batch]`` (float64).

    Holds the mean and the second moment of the draws' means, the log-sum-exp of the per-draw
    log-densities, the mixture CDF at ``y`` (the PIT) and, for CRPS, :math:`\\mathbb E|X - y|`
    and :math:`\\mathbb E|X - X'|` over distinct pairs of draws within each chunk: with
    ``pair_rolls`` = ``c - 1`` every pair of the chunk (exact when one chunk holds every draw),
    fewer for an unbiased estimate at a cost of ``pair_rolls`` evaluations per draw."""

    def __init__(self, y: torch.Tensor) -> None:
        self.y = y
        zeros = torch.zeros_like(y, dtype=torch.float64)
        self.count = 0
        self.sum_mean, self.sum_square, self.sum_var = zeros.clone(), zeros.clone(), zeros.clone()
        self.log_lik, self.cdf = LogMeanExp(), zeros.clone()
        self.abs_error, self.same_pair, self.pair_sum = zeros.clone(), zeros.clone(), zeros.clone()
        self.pairs = 0

    def update(self, mu: torch.Tensor, var: torch.Tensor, pair_rolls: int = 0) -> None:
        """Add ``c`` draws: means and variances ``[c, *batch]`` on the scale of ``y``."""
        if pair_rolls:  # in the draws' own precision (summed in float64): the costly term
            self._pairs(mu, var.expand_as(mu), min(pair_rolls, mu.shape[0] - 1))
        mu, var = mu.double(), var.double().expand_as(mu)
        y = self.y
        self.log_lik.update(-0.5 * ((y - mu).pow(2) / var + var.log() + math.log(2 * math.pi)))
        self.sum_mean += mu.sum(0)
        self.cdf += (0.5 * (1 + torch.erf((y - mu) / (2 * var).sqrt()))).sum(0)
        self.sum_square += mu.pow(2).sum(0)
        self.sum_var += var.sum(0)
        self.count += mu.shape[0]

    def _pairs(self, mu: torch.Tensor, var: torch.Tensor, rolls: int) -> None:
        y = self.y.to(mu.dtype)
        self.abs_error += abs_normal_mean(y - mu, var).sum(0, dtype=torch.float64)
        self.same_pair += abs_normal_mean(torch.zeros_like(mu), 2 * var).sum(0, dtype=torch.float64)
        for k in range(1, rolls + 1):  # draw t with draw t + k of the chunk: distinct, exchangeable
            other = abs_normal_mean(mu - mu.roll(k, 0), var + var.roll(k, 0))
            self.pair_sum += other.sum(0, dtype=torch.float64)
            self.pairs += mu.shape[0]

    @property
    def mean(self) -> torch.Tensor:
        return self.sum_mean / self.count

    def log_likelihood(self) -> torch.Tensor:
        """Per point: :math:`\\log \\frac1T\\sum_t \\mathcal N(y; \\mu_t, v_t)`."""
        return self.log_lik.value()

    def pit(self) -> torch.Tensor:
        return self.cdf / self.count

    def rmse(self) -> torch.Tensor:
        """Of the predictive mean, over the last dimension (the points)."""
        return (self.mean - self.y).pow(2).mean(-1).sqrt()

    def coverage(self, levels: Sequence[float]) -> dict[float, torch.Tensor]:
        u = self.pit()
        return {level: ((u - 0.5).abs() <= level / 2).double().mean(-1) for level in levels}

    def epistemic_variance(self) -> torch.Tensor:
        return (self.sum_square / self.count - self.mean.pow(2)).clamp_min(0)

    def aleatoric_variance(self) -> torch.Tensor:
        return self.sum_var / self.count

    def crps(self) -> torch.Tensor:
        """Per point; needs every update made with ``pair_rolls > 0``."""
        t = self.count
        pair = self.same_pair / t**2  # the T same-draw pairs of the T^2
        if self.pairs:  # the distinct pairs, from those seen within chunks
            pair = pair + (t - 1) / t * self.pair_sum / self.pairs
        return self.abs_error / t - 0.5 * pair


@dataclass
class RunScores:
    """Per-run scores of a predictive on original-scale targets (one entry per run)."""

    rmse: torch.Tensor  # [R] of the predictive mean
    test_ll: torch.Tensor  # [R] mean over points of log (1/T) sum_t N(y; mu_t, v_t)
    coverage: dict[float, torch.Tensor]  # level -> [R]
    mean: torch.Tensor  # [R, m] predictive mean


def score_gaussian_draws(
    draws: Callable[[int], tuple[torch.Tensor, torch.Tensor]],
    y: torch.Tensor,
    num_samples: int,
    chunk_size: int = 100,
    levels: tuple[float, ...] = (0.5, 0.9, 0.95),
) -> RunScores:
    r"""Score a Gaussian-mixture predictive from draws made chunk by chunk.

    ``draws(c)`` returns the means and variances of ``c`` draws, ``[c, R, m]``, on the scale of
    ``y`` (``[R, m]``): RMSE of the mean, test log-likelihood (eq. 13 when the variance is
    :math:`\tau^{-1}`) and coverage of the central intervals, per run.
    """
    if num_samples < 1 or chunk_size < 1:
        raise ValueError(f"num_samples and chunk_size must be >= 1, got {num_samples} and {chunk_size}")
    scores = GaussianMixtureScores(y)
    while scores.count < num_samples:
        scores.update(*draws(min(chunk_size, num_samples - scores.count)))
    return RunScores(
        rmse=scores.rmse(),
        test_ll=scores.log_likelihood().mean(-1),
        coverage=scores.coverage(levels),
        mean=scores.mean,
    )


class CategoricalScores:
    """Running sums of a classifier's predictive from draws of class probabilities ``[c, N, C]``.

    Holds the mean probabilities, the log-sum-exp of each draw's probability of the label (the
    NLL of the predictive by log-mean-exp), the mean per-draw entropy (for mutual information)
    and the votes of each draw's top class (for the variation ratio)."""

    def __init__(self, labels: torch.Tensor | None, num_classes: int, n: int) -> None:
        self.labels = labels
        self.count = 0
        self.sum_probs = torch.zeros(n, num_classes, dtype=torch.float64)
        self.sum_entropy = torch.zeros(n, dtype=torch.float64)
        self.votes = torch.zeros(n, num_classes, dtype=torch.float64)
        self.log_lik = LogMeanExp()

    def update(self, probs: torch.Tensor) -> None:
        p = probs.double().cpu()
        self.sum_probs += p.sum(0)
        self.sum_entropy += entropy(p).sum(0)
        self.votes += torch.nn.functional.one_hot(p.argmax(-1), p.shape[-1]).double().sum(0)
        if self.labels is not None:
            index = self.labels.cpu().long().expand(p.shape[0], -1).unsqueeze(-1)
            self.log_lik.update(p.gather(-1, index).squeeze(-1).log())
        self.count += p.shape[0]

    @property
    def mean_probs(self) -> torch.Tensor:
        return self.sum_probs / self.count

    def log_likelihood(self) -> torch.Tensor:
        """Per point: :math:`\\log \\frac1T\\sum_t p_t(y_n)`."""
        if self.labels is None:
            raise ValueError("no labels were given, so there is no likelihood")
        return self.log_lik.value()

    def predictive_entropy(self) -> torch.Tensor:
        return entropy(self.mean_probs)

    def mutual_information(self) -> torch.Tensor:
        return (self.predictive_entropy() - self.sum_entropy / self.count).clamp_min(0)

    def variation_ratio(self) -> torch.Tensor:
        return 1 - self.votes.max(-1).values / self.count
