"""Known answers for the calibration and selective-prediction scores (tolerances: 3 sd of the
sampling error at the sizes used, seeds fixed)."""

import pytest
import torch

from pyro_dropout.metrics import (
    adaptive_ece,
    aurc,
    classwise_ece,
    expected_calibration_error,
    fit_temperature,
    risk_coverage,
)


def _calibrated(n=20000, c=4, scale=2.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    logits = scale * torch.randn(n, c, generator=g)
    labels = torch.multinomial(logits.softmax(-1), 1, generator=g).squeeze(-1)
    return logits, labels


def test_a_calibrated_predictive_has_small_errors_and_an_overconfident_one_the_gap():
    logits, labels = _calibrated()
    probs = logits.softmax(-1)
    assert adaptive_ece(probs, labels) < 0.02 and classwise_ece(probs, labels) < 0.01
    # every point 0.9 sure of class 0, right half the time: ECE 0.4 whatever the binning
    probs = torch.tensor([[0.9, 0.1]]).repeat(1000, 1)
    labels = torch.arange(1000) % 2
    assert adaptive_ece(probs, labels) == pytest.approx(0.4)
    assert expected_calibration_error(probs, labels) == pytest.approx(0.4)
    assert classwise_ece(probs, labels) == pytest.approx(0.4)  # class 0: 0.9 vs 0.5; class 1: 0.1 vs 0.5


def test_draws_are_averaged_first():
    draws = torch.tensor([[[1.0, 0.0]], [[0.0, 1.0]]]).repeat(1, 10, 1)  # [T=2, N=10, C=2]
    assert adaptive_ece(draws, torch.zeros(10, dtype=torch.long)) == pytest.approx(0.5)


def test_risk_coverage_refuses_the_least_certain_first():
    probs = torch.tensor([[0.99, 0.01], [0.6, 0.4], [0.8, 0.2], [0.55, 0.45]])
    labels = torch.tensor([0, 1, 0, 0])  # the 0.6 point is wrong
    coverage, risk = risk_coverage(probs, labels)
    assert coverage.tolist() == [0.25, 0.5, 0.75, 1.0]
    assert risk.tolist() == pytest.approx([0.0, 0.0, 1 / 3, 1 / 4])  # order 0.99, 0.8, 0.6, 0.55
    assert aurc(probs, labels) == pytest.approx((1 / 3 + 1 / 4) / 4)
    with pytest.raises(ValueError, match=r"uncertainty has shape \(3,\), expected \(4,\)"):
        risk_coverage(probs, labels, torch.zeros(3))


def test_temperature_scaling_recovers_the_temperature():
    logits, labels = _calibrated(seed=1)
    assert fit_temperature(3.0 * logits, labels) == pytest.approx(3.0, rel=0.05)
    assert fit_temperature(logits, labels) == pytest.approx(1.0, rel=0.05)
    # S passes: the T of the averaged predictive; identical passes give the one-network T
    assert fit_temperature((3.0 * logits).expand(5, -1, -1), labels) == pytest.approx(3.0, rel=0.05)
    assert fit_temperature(logits.expand(2, -1, -1), labels) == pytest.approx(fit_temperature(logits, labels))
    with pytest.raises(ValueError, match=r"logits must be \[N, C\] or \[S, N, C\]"):
        fit_temperature(logits[None, None], labels)
