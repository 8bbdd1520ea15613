"""Split conformal prediction: the empirical coverage of the intervals and sets is at the nominal
level on synthetic data whose predictive is deliberately miscalibrated (seeded; the tolerance,
0.025, is about three standard deviations of the coverage of 20,000 test points given 2,000
calibration points: sqrt(0.09 / 2000) + sqrt(0.09 / 20000) = 0.0088)."""

from __future__ import annotations

import pytest
import torch

from pyro_dropout.metrics import conformal_interval, conformal_quantile, conformal_set

TOL = 0.025


def _regression(n: int, g: torch.Generator):
    x = torch.rand(n, generator=g) * 4 - 2
    noise = 0.1 + 0.5 * x.abs()  # heteroscedastic
    y = torch.sin(2 * x) + noise * torch.randn(n, generator=g)
    mean, sd = torch.sin(2 * x) + 0.05, 0.5 * noise  # a predictive that is off and over-confident
    return (mean, sd), y


@pytest.mark.parametrize("normalised", [True, False])
@pytest.mark.parametrize("alpha", [0.1, 0.2])
def test_regression_intervals_cover_at_the_nominal_level(alpha, normalised):
    g = torch.Generator().manual_seed(0)
    calibration, y_cal = _regression(2000, g)
    test, y_test = _regression(20000, g)
    naive = ((y_test - test[0]).abs() <= 1.645 * test[1]).double().mean()  # the model's own 90%
    low, high = conformal_interval(calibration, y_cal, test, alpha, normalised=normalised)
    covered = ((y_test >= low) & (y_test <= high)).double().mean()
    assert abs(float(covered) - (1 - alpha)) < TOL
    assert float(naive) < 0.75  # the raw predictive under-covers: conformal fixes it


def _classes(n: int, g: torch.Generator):
    logits = 2 * torch.randn(n, 5, generator=g)
    true = logits.softmax(-1)
    y = torch.multinomial(true, 1, generator=g).squeeze(-1)
    draws = (3 * logits + 0.5 * torch.randn(8, n, 5, generator=g)).softmax(-1)  # over-confident [T, N, C]
    return draws, y


@pytest.mark.parametrize("method", ["aps", "raps"])
def test_classification_sets_cover_at_the_nominal_level(method):
    g = torch.Generator().manual_seed(1)
    calibration, y_cal = _classes(2000, g)
    test, y_test = _classes(20000, g)
    sets = conformal_set(calibration, y_cal, test, 0.1, method=method, generator=g)
    covered = sets.gather(-1, y_test[:, None]).double().mean()
    assert abs(float(covered) - 0.9) < TOL
    assert 1.0 <= float(sets.sum(-1).double().mean()) < 5.0  # informative: not every class


def test_the_quantile_and_bad_inputs():
    scores = torch.arange(1.0, 10.0)  # n = 9: the ceil(10 * 0.8) = 8th smallest
    assert conformal_quantile(scores, 0.2) == 8.0
    assert conformal_quantile(scores, 0.05) == float("inf")  # too few points for 95%
    with pytest.raises(ValueError, match="alpha must be between 0 and 1"):
        conformal_quantile(scores, 1.5)
    with pytest.raises(ValueError, match="method must be 'aps' or 'raps'"):
        conformal_set(torch.rand(4, 3), torch.zeros(4), torch.rand(2, 3), method="lac")
    probs = torch.rand(4, 3).softmax(-1)
    with pytest.raises(ValueError, match=r"expected 4 whole-number labels in 0\.\.2"):
        conformal_set(probs, torch.tensor([0, 1, 2, 3]), probs[:2])


BAD_SETS = [  # (calibration, labels, test, keywords, message); before, each gave a set without a word
    ("probs", [0.0, 1.7, 2.0, 0.0], "probs", {}, "whole-number labels"),
    ("nan", [0, 1, 2, 0], "probs", {}, "NaN or infinite"),
    ("probs", [0, 1, 2, 0], "five", {}, "calibration predictions have 3 classes, the test predictions 5"),
    ("logits", [0, 1, 2, 0], "probs", {}, r"logits\?\): give probabilities"),
    ("probs", [0, 1, 2, 0], "probs", {"method": "raps", "lam": -1.0}, "lam must be a finite number >= 0"),
    ("probs", [0, 1, 2, 0], "probs", {"method": "raps", "lam": float("nan")}, "lam must be"),
    ("probs", [0, 1, 2, 0], "probs", {"method": "raps", "k_reg": -5}, "k_reg must be a whole number"),
    ("empty", [], "probs", {}, "needs calibration points; got none"),
]


@pytest.mark.parametrize(("cal", "labels", "test", "keywords", "message"), BAD_SETS)
def test_bad_set_inputs_are_named(cal, labels, test, keywords, message):
    g = torch.Generator().manual_seed(0)
    probs = torch.rand(4, 3, generator=g).softmax(-1)
    made = {
        "probs": probs,
        "nan": probs.clone().index_fill_(0, torch.tensor([1]), float("nan")),
        "five": torch.rand(2, 5, generator=g).softmax(-1),
        "logits": torch.randn(4, 3, generator=g) * 3,
        "empty": probs[:0],
    }
    with pytest.raises(ValueError, match=message):
        conformal_set(made[cal], torch.tensor(labels), made[test], **keywords)


def test_bad_interval_inputs_are_named():
    mean, sd, y = torch.zeros(5), torch.ones(5), torch.zeros(5)
    nan = torch.tensor([0.0, float("nan"), 0.0, 0.0, 0.0])
    cases = [
        ((mean, sd), nan, (mean, sd), "y_calibration: 1 of its 5 values are NaN"),
        ((nan, sd), y, (mean, sd), "calibration's mean: 1 of its 5 values are NaN"),
        ((mean, nan.abs()), y, (mean, sd), "calibration's sd: 1 of its 5"),
        ((mean, -sd), y, (mean, sd), "calibration's sd must be positive"),
        ((mean, 0 * sd), y, (mean, sd), "calibration's sd must be positive"),
        ((mean, sd), y, (mean, -sd), "test's sd must be >= 0"),
        ((mean, sd), y[:3], (mean, sd), "expected 5 targets"),
        ((mean, sd[:2]), y, (mean, sd), r"must be \[N\] each"),
    ]
    for cal, targets, test, message in cases:
        with pytest.raises(ValueError, match=message):
            conformal_interval(cal, targets, test)
    with pytest.raises(ValueError, match="1 of the 3 scores are NaN"):
        conformal_quantile(torch.tensor([1.0, float("nan"), 2.0]), 0.5)
    lower, upper = conformal_interval((mean, 0 * sd), y + 1, (mean, sd), normalised=False)
    assert (upper > lower).all()  # a zero sd is fine for constant widths


def test_predictions_of_a_model_go_in_as_they_are():
    import pyro

    from pyro_dropout import DropoutGuide, predict
    from pyro_dropout.nn import MLP

    x, y = torch.randn(40, 2), torch.randn(40)
    model = MLP(2, hidden=(8,), tau=4.0)
    guide = DropoutGuide(model, dropout=0.2)
    guide(x, y)
    cal, test = predict(model, guide, x[:30], num_samples=20), predict(model, guide, x[30:], num_samples=20)
    low, high = conformal_interval(cal, y[:30], test, 0.2)
    assert low.shape == high.shape == (10,) and (high > low).all()
    pyro.clear_param_store()  # a second model: its own parameters
    classifier = MLP(2, 3, hidden=(8,), likelihood="categorical")
    labels = torch.randint(0, 3, (40,))
    guide = DropoutGuide(classifier, dropout=0.2)
    guide(x, labels)
    cal, test = (
        predict(classifier, guide, x[:30], num_samples=20),
        predict(classifier, guide, x[30:], num_samples=20),
    )
    assert conformal_set(cal, labels[:30], test, 0.2).shape == (10, 3)
