"""Acquisition scores and BatchBALD against known answers: BALD is the mutual information, a batch
of one is BALD's best, the joint entropy is brute-force enumeration's, and duplicates are avoided."""

import itertools
import math

import pytest
import torch

from pyro_dropout.metrics import (
    acquisition_scores,
    bald,
    batch_bald,
    epistemic_variance,
    joint_entropy,
    max_entropy,
    mean_std,
    mutual_information,
    predictive_entropy,
    variation_ratios,
)


def _draws(t=16, n=12, c=3, seed=0, sharp=3.0):
    g = torch.Generator().manual_seed(seed)
    return (sharp * torch.randn(t, n, c, generator=g, dtype=torch.float64)).softmax(-1)


def _mi_of(probs):
    """A set's joint mutual information with the weights by brute-force enumeration."""
    t, n, c = probs.shape
    total = torch.zeros((), dtype=probs.dtype)
    for labels in itertools.product(range(c), repeat=n):
        per_draw = torch.ones(t, dtype=probs.dtype)
        for i, y in enumerate(labels):
            per_draw = per_draw * probs[:, i, y]
        p = per_draw.mean()
        total -= p * p.log() if p > 0 else 0.0
    conditional = -(probs * probs.log()).sum(-1).mean(0).sum()
    return total - conditional


def test_the_scores_are_the_uncertainty_measures_they_name():
    p = _draws()
    assert torch.equal(bald(p), mutual_information(p))
    assert torch.equal(max_entropy(p), predictive_entropy(p))
    sd = p.std(0, unbiased=False).mean(-1)
    assert torch.allclose(mean_std(p), sd, atol=1e-12)
    assert (
        variation_ratios(p).shape == (12,) and ((variation_ratios(p) >= 0) & (variation_ratios(p) < 1)).all()
    )
    means = torch.randn(50, 7, dtype=torch.float64)
    assert torch.allclose(epistemic_variance(means), means.var(0, unbiased=False))
    g = torch.Generator().manual_seed(0)
    assert acquisition_scores("random", p, g).shape == (12,)
    with pytest.raises(ValueError, match="unknown function 'bold'; choose from bald"):
        acquisition_scores("bold", p)


def test_a_batch_of_one_is_balds_best_point():
    p = _draws(seed=1)
    index, score = batch_bald(p, 1)
    assert int(index[0]) == int(bald(p).argmax())
    assert float(score[0]) == pytest.approx(float(bald(p).max()), rel=1e-9)


def test_the_joint_entropy_and_the_batch_scores_are_brute_forces():
    p = _draws(t=8, n=6, c=3, seed=2)
    assert float(joint_entropy(p[:, :4])) == pytest.approx(
        float(_mi_of(p[:, :4]) + (-(p[:, :4] * p[:, :4].log()).sum(-1).mean(0).sum())), rel=1e-9
    )
    chosen, scores = batch_bald(p, 4)
    for m in range(1, 5):  # each score: the joint MI of the batch so far (exact: 3^4 configurations)
        assert float(scores[m - 1]) == pytest.approx(float(_mi_of(p[:, chosen[:m]])), rel=1e-9)
    # each greedy step took the best next point
    best = max(
        range(6), key=lambda i: -math.inf if i in chosen[:1] else float(_mi_of(p[:, [int(chosen[0]), i]]))
    )
    assert best == int(chosen[1])


def test_sampled_configurations_estimate_the_joint_mutual_information():
    p = _draws(t=20, n=10, c=3, seed=3)
    g = torch.Generator().manual_seed(0)
    chosen, scores = batch_bald(p, 7, num_configurations=300, generator=g)  # 3^6 = 729 > 300: sampled
    exact = float(_mi_of(p[:, chosen]))
    # 300 configurations: the estimate's relative error is a few percent (the paper's estimator)
    assert float(scores[-1]) == pytest.approx(exact, rel=0.05)


def test_duplicates_are_picked_by_the_top_k_of_bald_and_not_by_batch_bald():
    """Three copies of the most informative point, and two points almost as informative about
    other directions of the weights: the top 3 of BALD are the three copies; BatchBALD takes one."""
    t = 32
    half = torch.arange(t) < t // 2
    quarter = (torch.arange(t) // 8) % 2 == 0
    eighth = (torch.arange(t) // 4) % 2 == 0

    def point(pattern, high):
        first = torch.where(pattern, high, 1 - high).double()
        return torch.stack([first, 1 - first], -1)  # [T, 2]

    a = point(half, 0.95)
    pool = torch.stack([a, a, a, point(quarter, 0.9), point(eighth, 0.9)], 1)  # [T, 5, 2]
    top = set(bald(pool).topk(3).indices.tolist())
    assert top == {0, 1, 2}
    chosen, _ = batch_bald(pool, 3)
    assert len({int(i) for i in chosen} & {0, 1, 2}) == 1
    assert {3, 4} <= {int(i) for i in chosen}


def test_bad_arguments_are_named():
    p = _draws()
    for k in (0, 13, True, 2.0):
        with pytest.raises(ValueError, match=r"k must be an int in \[1, 12\]"):
            batch_bald(p, k)
    with pytest.raises(ValueError, match="num_configurations must be a positive int"):
        batch_bald(p, 2, num_configurations=0)
    with pytest.raises(ValueError, match="probabilities must sum to one"):
        batch_bald(p * 0.5, 2)
    with pytest.raises(ValueError, match=r"means must be \[T >= 2, N >= 1\]"):
        epistemic_variance(torch.randn(5))
