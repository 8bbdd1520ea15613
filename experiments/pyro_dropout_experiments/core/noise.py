r"""Estimates of a regression's noise precision from the draws of a trained network: the closed-form
M-step of Concrete dropout's EM, and the precision that best predicts rows it did not train on."""

from __future__ import annotations

import math

import torch

__all__ = ["held_out_tau", "m_step_tau"]


def m_step_tau(means: torch.Tensor, y: torch.Tensor, prior: tuple[float, float]) -> torch.Tensor:
    r"""The closed-form M-step (paper 001, appendix D): for :math:`y \sim \mathcal{N}(f(x), \tau^{-1})`
    and :math:`\tau \sim \mathrm{Gamma}(a, b)`,
    :math:`\tau^* = (a - 1 + N/2) / (b + \tfrac12 \sum_n \mathbb{E}_q (y_n - f(x_n))^2)`, the
    expectation over the draws ``means`` ``[T, R, n]`` of targets ``y`` ``[R, n]``; ``[R]``."""
    a, b = prior
    sse = (means - y).pow(2).mean(0).sum(-1)
    return (a - 1 + y.shape[-1] / 2) / (b + sse / 2)


def held_out_tau(means: torch.Tensor, y: torch.Tensor, start: torch.Tensor, steps: int = 60) -> torch.Tensor:
    r"""Each run's precision maximising the predictive log-likelihood of rows the network did not
    train on, :math:`\sum_n \log \frac1T \sum_t \mathcal{N}(y_n; f_t(x_n), \tau^{-1})`, for the
    draws ``means`` ``[T, R, n]`` and targets ``y`` ``[R, n]``: a golden-section search over
    :math:`\log\tau` within a factor :math:`e^{6}` of ``start`` ``[R]``; ``[R]``."""
    resid2 = (means - y).pow(2)
    draws = means.shape[0]

    def loglik(log_tau: torch.Tensor) -> torch.Tensor:
        tau = log_tau.exp().reshape(1, -1, 1)
        per_draw = 0.5 * tau.log() - 0.5 * tau * resid2
        return (torch.logsumexp(per_draw, 0) - math.log(draws)).sum(-1)

    lo, hi = start.log() - 6.0, start.log() + 6.0
    ratio = (math.sqrt(5) - 1) / 2
    a, b = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
    at_a, at_b = loglik(a), loglik(b)
    for _ in range(steps):  # one new evaluation a step: the kept inner point is the next a or b
        left = at_a > at_b
        lo, hi = torch.where(left, lo, a), torch.where(left, b, hi)
        new = torch.where(left, hi - ratio * (hi - lo), lo + ratio * (hi - lo))
        at_new = loglik(new)
        a, b = torch.where(left, new, b), torch.where(left, a, new)
        at_a, at_b = torch.where(left, at_new, at_b), torch.where(left, at_a, at_new)
    return ((lo + hi) / 2).exp()
