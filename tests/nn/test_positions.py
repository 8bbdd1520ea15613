"""A class per token or per pixel: the ``categorical`` likelihood on ``[N, T, C]`` outputs and the
``segmentation`` likelihood on ``[N, C, H, W]``, scored per element by ``evaluate`` (accuracy, NLL,
ECE, entropy, mutual information) with a per-point summary; ``ood`` on points' mean scores
(the scores computed here by hand from ``predict``'s draws, 1e-6)."""

from __future__ import annotations

import pytest
import torch

from pyro_dropout import MCDropout, predict
from pyro_dropout.metrics import classification_report, mutual_information, predictive_entropy

from .conformance_sequence import RNNModel
from .conformance_vision import UNet


def _language_model():
    torch.manual_seed(0)
    return MCDropout(RNNModel().eval(), "classification", num_samples=40)


def test_a_class_per_token_is_scored_per_token_with_a_summary_per_sequence():
    bnn = _language_model()
    x, y = torch.randint(0, 20, (5, 6)), torch.randint(0, 20, (5, 6))
    report = bnn.evaluate(x, y)
    assert report.positions == (6,) and report.probs.shape == (5, 6, 20)
    assert report.scores["mutual_information"].shape == (5, 6)
    assert set(report.per_item) >= {"accuracy", "nll", "predictive_entropy", "mutual_information"}
    right = (report.probs.argmax(-1) == y).double()
    assert report.accuracy == pytest.approx(float(right.mean()))
    assert torch.allclose(report.per_item["accuracy"], right.mean(1))
    # the same scores from predict's draws, by hand: the non-streaming report agrees
    pyro_seed = torch.get_rng_state()
    pred = predict(bnn.model, bnn.guide, x, y, num_samples=40)
    torch.set_rng_state(pyro_seed)
    probs = pred.probs["obs"]  # [T, N, T_tokens, C]
    assert probs.shape == (40, 5, 6, 20)
    by_hand = classification_report(pred)
    flat = probs.reshape(40, -1, 20)
    assert torch.allclose(
        by_hand.scores["predictive_entropy"].reshape(-1), predictive_entropy(flat), atol=1e-6
    )
    assert torch.allclose(
        by_hand.scores["mutual_information"].reshape(-1), mutual_information(flat), atol=1e-6
    )


def test_ood_scores_a_sequence_by_its_tokens_mean():
    bnn = _language_model()
    found = bnn.ood(torch.randint(0, 20, (4, 6)), torch.randint(0, 20, (3, 6)))
    assert set(found) == {"predictive_entropy", "max_prob", "mutual_information", "variation_ratio"}
    assert all(0 <= v["auroc"] <= 1 for v in found.values())


def test_a_class_per_pixel_and_targets_of_the_wrong_shape_are_named():
    torch.manual_seed(0)
    bnn = MCDropout(UNet().eval(), "segmentation", num_samples=20)
    x, y = torch.randn(3, 1, 8, 8), torch.randint(0, 3, (3, 8, 8))
    report = bnn.evaluate(x, y)
    assert report.positions == (8, 8) and report.per_item["accuracy"].shape == (3,)
    assert bnn.probs(x).shape == (20, 3, 8, 8, 3)  # the classes last
    with pytest.raises(ValueError, match=r"a class at each of \(8, 8\) positions.*expects \(3, 8, 8\)"):
        bnn.evaluate(x, torch.randint(0, 3, (3, 4, 4)))


def test_a_regression_network_has_no_class_probabilities_to_give():
    torch.manual_seed(0)
    bnn = MCDropout(
        torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Dropout(0.2), torch.nn.Linear(4, 1)),
        "regression",
        tau=1.0,
    )
    with pytest.raises(ValueError, match=r"task is 'regression'.*no class probabilities"):
        bnn.ood(torch.randn(4, 3), torch.randn(4, 3))
