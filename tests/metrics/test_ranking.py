import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pyro_dropout.metrics import aupr, auroc


def _auroc_brute_force(pos, neg):
    total = 0.0
    for p in pos:
        for n in neg:
            total += 1.0 if p > n else 0.5 if p == n else 0.0
    return total / (len(pos) * len(neg))


def _aupr_brute_force(pos, neg):
    scores = sorted(set(pos) | set(neg), reverse=True)
    area, prev_recall = 0.0, 0.0
    for threshold in scores:
        tp = sum(p >= threshold for p in pos)
        fp = sum(n >= threshold for n in neg)
        recall, precision = tp / len(pos), tp / (tp + fp)
        area += (recall - prev_recall) * precision
        prev_recall = recall
    return area


scores = st.lists(st.integers(0, 5), min_size=1, max_size=25)  # few values: many ties


@settings(max_examples=200, deadline=None)
@given(pos=scores, neg=scores)
def test_auroc_and_aupr_match_brute_force_with_ties(pos, neg):
    assert auroc(pos, neg) == pytest.approx(_auroc_brute_force(pos, neg), abs=1e-12)
    assert aupr(pos, neg) == pytest.approx(_aupr_brute_force(pos, neg), abs=1e-12)
    assert auroc(pos, neg) + auroc(neg, pos) == pytest.approx(1.0)


def test_known_values():
    assert auroc([2.0, 3.0], [0.0, 1.0]) == 1.0
    assert auroc([0.0], [1.0]) == 0.0
    assert auroc([1.0, 1.0], [1.0]) == 0.5
    assert aupr([2.0, 3.0], [0.0, 1.0]) == 1.0
    # all tied: precision is the positive share at the only threshold
    assert aupr([1.0], [1.0, 1.0, 1.0]) == pytest.approx(0.25)


def test_random_scores_have_auroc_one_half():
    g = torch.Generator().manual_seed(0)
    value = auroc(torch.randn(5000, generator=g), torch.randn(5000, generator=g))
    # se of the AUROC under H0 with 5000 + 5000: sqrt((n+m+1)/(12 n m)) = 0.0041; 4 se
    assert abs(value - 0.5) < 0.017


def test_bad_scores():
    with pytest.raises(ValueError, match="at least one"):
        auroc([], [1.0])
    with pytest.raises(ValueError, match="NaN"):
        auroc([float("nan")], [1.0])


def test_fpr_at_95_tpr_counts_the_negatives_at_the_threshold_that_keeps_95_percent():
    from pyro_dropout.metrics import fpr_at_tpr

    positives = torch.arange(1.0, 21.0)  # 20 scores: the 19th highest, 2, keeps 95% of them
    assert fpr_at_tpr(positives, torch.tensor([0.0, 1.5, 2.0, 3.0])) == 0.5  # 2 (tied) and 3 flagged
    assert fpr_at_tpr(positives, torch.tensor([0.0, 1.0])) == 0.0
    assert (
        fpr_at_tpr(positives, torch.tensor([0.5]), tpr=1.0) == 0.0
        and fpr_at_tpr(positives, torch.tensor([1.0]), tpr=1.0) == 1.0
    )
    g = torch.Generator().manual_seed(0)
    pos, neg = torch.randn(400, generator=g) + 1, torch.randn(300, generator=g)
    brute = min(float((neg >= t).double().mean()) for t in pos if float((pos >= t).double().mean()) >= 0.95)
    assert fpr_at_tpr(pos, neg) == brute  # the lowest FPR among the thresholds that keep 95%
    for bad in (0, 1.5, True, "0.95"):
        with pytest.raises(ValueError, match="tpr must be a number in"):
            fpr_at_tpr(pos, neg, tpr=bad)
