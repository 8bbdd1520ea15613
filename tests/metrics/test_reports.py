import math

import pyro
import pytest
import torch
from pyro.infer import SVI

from pyro_dropout import DropoutELBO, DropoutGuide, evaluate, predict
from pyro_dropout.metrics import (
    ClassificationReport,
    RegressionReport,
    classification_report,
    gaussian_log_likelihood,
    ood_detection,
    regression_report,
)
from pyro_dropout.nn import MLP


def _fit(model, x, y, steps=600, p=0.1):
    guide = DropoutGuide(model, dropout=p)
    svi = SVI(model, guide, pyro.optim.Adam({"lr": 1e-2}), DropoutELBO(num_particles=4))
    for _ in range(steps):
        svi.step(x, y)
    return guide


def test_regression_report_matches_the_metric_functions():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(80, 2, generator=g)
    y = x[:, 0] - x[:, 1] + 0.2 * torch.randn(80, generator=g)
    model = MLP(2, hidden=(16,), tau=25.0)
    guide = _fit(model, x, y)
    report = evaluate(model, guide, x, y, num_samples=200)
    assert isinstance(report, RegressionReport) and report.num_samples == 200
    pyro.set_rng_seed(3)
    pred = predict(model, guide, x, y, num_samples=200)
    again = regression_report(pred)
    eq13 = gaussian_log_likelihood(pred["mean"], y, 25.0).mean().item()
    assert again.test_ll == pytest.approx(eq13, rel=1e-5)
    # the split: aleatoric = 1/tau; total = epistemic + aleatoric
    assert torch.allclose(again.aleatoric_variance, torch.full((80,), 1 / 25.0))
    assert torch.allclose(again.epistemic_variance, pred["mean"].var(0, unbiased=False))
    assert report.rmse < 0.5 and report.rmse_standard is not None
    assert set(report.coverage) == {0.5, 0.8, 0.9, 0.95}
    assert "test_ll" in str(report)


def test_classification_report_and_ood():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(200, 2, generator=g)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 0).long()
    model = MLP(2, 3, hidden=(32,), likelihood="categorical")
    guide = _fit(model, x, y, steps=800, p=0.2)
    report = evaluate(model, guide, x, y, num_samples=100)
    assert isinstance(report, ClassificationReport)
    assert report.accuracy > 0.85 and report.accuracy_standard > 0.85
    assert 0 < report.ece < 0.5 and report.nll < math.log(3)
    assert set(report.misclassification_auroc) == {
        "predictive_entropy",
        "max_prob",
        "mutual_information",
        "variation_ratio",
    }
    # far-away inputs are out of distribution: MC dropout is less certain there
    pred_in = predict(model, guide, x, num_samples=100)
    pred_out = predict(model, guide, 8 * torch.randn(200, 2, generator=g), num_samples=100)
    scores = ood_detection(pred_in, pred_out)
    assert scores["mutual_information"]["auroc"] > 0.6


def test_wrong_task_type_and_too_few_draws():
    x, y = torch.randn(10, 2), torch.randn(10)
    model = MLP(2, hidden=(4,))
    guide = DropoutGuide(model)
    pred = predict(model, guide, x, y, num_samples=3)
    with pytest.raises(ValueError, match="use regression_report"):
        classification_report(pred)
    with pytest.raises(ValueError, match="at least 2 draws"):
        regression_report(predict(model, guide, x, y, num_samples=1))
    with pytest.raises(ValueError, match="no observations"):
        regression_report(predict(model, guide, x, num_samples=3))
    cmodel = MLP(2, 3, hidden=(4,), likelihood="categorical")
    cguide = DropoutGuide(cmodel)
    cpred = predict(cmodel, cguide, x, torch.zeros(10, dtype=torch.long), num_samples=3)
    with pytest.raises(ValueError, match="use classification_report"):
        regression_report(cpred)
    with pytest.raises(ValueError, match="class probabilities"):
        ood_detection(pred, pred)
