import math

import pytest
import torch

from pyro_dropout.metrics import (
    accuracy,
    brier_score,
    expected_calibration_error,
    mutual_information,
    negative_log_likelihood,
    predictive_entropy,
    reliability_diagram,
    variation_ratio,
)


def test_entropy_and_mutual_information_of_constructed_distributions():
    # point 0: passes disagree completely (each certain): H = log 2, MI = log 2
    # point 1: passes agree on a uniform distribution over 3 classes: H = log 3, MI = 0
    # point 2: all passes certain of class 2: H = 0, MI = 0
    probs = torch.tensor(
        [
            [[1.0, 0.0, 0.0], [1 / 3, 1 / 3, 1 / 3], [0.0, 0.0, 1.0]],
            [[0.0, 1.0, 0.0], [1 / 3, 1 / 3, 1 / 3], [0.0, 0.0, 1.0]],
        ],
        dtype=torch.float64,
    )
    assert torch.allclose(
        predictive_entropy(probs),
        torch.tensor([math.log(2), math.log(3), 0.0], dtype=torch.float64),
    )
    assert torch.allclose(
        mutual_information(probs), torch.tensor([math.log(2), 0.0, 0.0], dtype=torch.float64)
    )


def test_mutual_information_against_a_direct_computation():
    g = torch.Generator().manual_seed(0)
    probs = torch.softmax(torch.randn(20, 7, 4, generator=g, dtype=torch.float64), -1)
    direct = []
    for n in range(7):
        mean = [sum(probs[t, n, c].item() for t in range(20)) / 20 for c in range(4)]
        h_mean = -sum(m * math.log(m) for m in mean)
        h_each = sum(-sum(p * math.log(p) for p in probs[t, n].tolist()) for t in range(20)) / 20
        direct.append(h_mean - h_each)
    assert torch.allclose(mutual_information(probs), torch.tensor(direct, dtype=torch.float64))


def test_variation_ratio_counts_votes_for_the_mode():
    # 4 passes voting 0, 0, 1, 2 -> mode count 2 -> 1 - 2/4; unanimous -> 0
    votes = torch.tensor([[0, 2], [0, 2], [1, 2], [2, 2]])
    probs = torch.nn.functional.one_hot(votes, 3).double() * 0.8 + 0.2 / 3
    assert torch.allclose(variation_ratio(probs), torch.tensor([0.5, 0.0], dtype=torch.float64))


def _ece_brute_force(probs, labels, n_bins):
    mean = probs.mean(0)
    total, n = 0.0, len(labels)
    for b in range(n_bins):
        lo, hi = b / n_bins, (b + 1) / n_bins
        members = [i for i in range(n) if (lo < mean[i].max() <= hi) or (b == 0 and mean[i].max() == 0)]
        if members:
            acc = sum(int(mean[i].argmax() == labels[i]) for i in members) / len(members)
            conf = sum(mean[i].max().item() for i in members) / len(members)
            total += len(members) / n * abs(acc - conf)
    return total


@pytest.mark.parametrize("n_bins", [1, 10, 15])
def test_ece_against_the_definition(n_bins):
    g = torch.Generator().manual_seed(1)
    probs = torch.softmax(2 * torch.randn(5, 300, 4, generator=g, dtype=torch.float64), -1)
    labels = torch.randint(0, 4, (300,), generator=g)
    assert expected_calibration_error(probs, labels, n_bins) == pytest.approx(
        _ece_brute_force(probs, labels, n_bins), abs=1e-12
    )


def test_ece_bin_edges_and_perfect_calibration():
    # confidences exactly on an edge (0.6 with 5 bins) go to the bin (0.4, 0.6]
    probs = torch.tensor([[[0.6, 0.4]], [[0.6, 0.4]]], dtype=torch.float64).expand(2, 10, 2).contiguous()
    labels = torch.tensor([0] * 6 + [1] * 4)  # accuracy 0.6 = confidence 0.6
    diagram = reliability_diagram(probs, labels, n_bins=5)
    assert diagram.counts.tolist() == [0, 0, 10, 0, 0]
    assert expected_calibration_error(probs, labels, 5) == pytest.approx(0.0, abs=1e-12)


def test_accuracy_nll_brier():
    probs = torch.tensor([[[0.9, 0.1], [0.2, 0.8]], [[0.7, 0.3], [0.4, 0.6]]], dtype=torch.float64)
    labels = torch.tensor([0, 0])
    assert accuracy(probs, labels) == pytest.approx(0.5)
    assert negative_log_likelihood(probs, labels) == pytest.approx(-(math.log(0.8) + math.log(0.3)) / 2)
    assert brier_score(probs, labels) == pytest.approx(((0.2**2 + 0.2**2) + (0.7**2 + 0.7**2)) / 2)


def test_bad_probabilities_and_labels():
    good = torch.full((3, 4, 2), 0.5)
    with pytest.raises(ValueError, match="sum to one"):
        predictive_entropy(torch.full((3, 4, 2), 0.4))
    with pytest.raises(ValueError, match=r"\[T, N, C\]"):
        mutual_information(torch.full((4, 2), 0.5))
    with pytest.raises(ValueError, match="NaN"):
        variation_ratio(torch.full((3, 4, 2), float("nan")))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        predictive_entropy(torch.tensor([[[1.5, -0.5]]]))
    with pytest.raises(ValueError, match="shape"):
        expected_calibration_error(good, torch.zeros(5, dtype=torch.long))
    with pytest.raises(ValueError, match="regression target"):
        accuracy(good, torch.tensor([0.3, 1.2, 0.0, 1.0]))
    with pytest.raises(ValueError, match="labels must lie"):
        accuracy(good, torch.tensor([0, 1, 2, 0]))


def test_the_metrics_take_predict_standards_output_as_it_is():
    """predict_standard's probabilities are [1, N, C] (T = 1): the metrics take them unchanged."""
    from pyro_dropout import DropoutGuide, predict_standard
    from pyro_dropout.metrics import accuracy, expected_calibration_error, negative_log_likelihood
    from pyro_dropout.nn import MLP

    x, y = torch.randn(10, 2), torch.randint(0, 3, (10,))
    model = MLP(2, 3, hidden=(4,), likelihood="categorical")
    guide = DropoutGuide(model)
    guide(x, y)
    probs = predict_standard(model, guide, x).probs["obs"]
    assert probs.shape == (1, 10, 3)
    assert accuracy(probs, y) == accuracy(probs[0], y)
    assert negative_log_likelihood(probs, y) == pytest.approx(negative_log_likelihood(probs[0], y))
    assert expected_calibration_error(probs, y) == pytest.approx(expected_calibration_error(probs[0], y))
