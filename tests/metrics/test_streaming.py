"""Scores accumulated chunk by chunk of draws."""

import math

import pyro
import pytest
import torch

from pyro_dropout.metrics import gaussian_log_likelihood, score_gaussian_draws


def test_streaming_scores_equal_eq13():
    g = torch.Generator().manual_seed(0)
    draws = torch.randn(50, 2, 7, generator=g, dtype=torch.float64)
    y = torch.randn(2, 7, generator=g, dtype=torch.float64)
    var = torch.tensor(0.25, dtype=torch.float64)
    calls = iter(range(0, 50, 16))

    def chunk(c):
        start = next(calls)
        return draws[start : start + c], var.expand(c, 2, 7)

    scores = score_gaussian_draws(chunk, y, 50, 16)
    for r in range(2):
        eq13 = gaussian_log_likelihood(draws[:, r], y[r], 4.0).mean()
        assert torch.allclose(scores.test_ll[r], eq13)
        assert torch.allclose(scores.rmse[r], (draws[:, r].mean(0) - y[r]).pow(2).mean().sqrt())


def _trained(task):
    """A small network of each task after a few steps (its draws differ, which is all the test needs)."""
    from pyro.infer import SVI

    from pyro_dropout import DropoutELBO, DropoutGuide
    from pyro_dropout.nn import MLP

    g = torch.Generator().manual_seed(0)
    x = torch.randn(60, 3, generator=g)
    if task == "regression":
        model, y = MLP(3, hidden=(16,), tau=4.0), x[:, 0] + 0.3 * torch.randn(60, generator=g)
    else:
        model, y = (
            MLP(3, 3, hidden=(16,), likelihood="categorical"),
            (x[:, 0] > 0).long() + (x[:, 1] > 1).long(),
        )
    guide = DropoutGuide(model, dropout=0.2)
    svi = SVI(model, guide, pyro.optim.Adam({"lr": 1e-2}), DropoutELBO())
    for _ in range(50):
        svi.step(x, y)
    return model, guide, x, y


@pytest.mark.parametrize("chunk", [None, 7])
def test_evaluate_streams_the_same_regression_scores(chunk):
    """Chunk by chunk or all at once, evaluate gives what regression_report gives on all the
    draws held in memory (same seed and return_sites, so the same draws; tolerance 1e-6
    relative, float64 sums). CRPS
    is exact in one chunk and an unbiased estimate across chunks (here within 2%)."""
    from pyro_dropout import evaluate, predict
    from pyro_dropout.metrics import regression_report

    model, guide, x, y = _trained("regression")
    pyro.set_rng_seed(5)
    streamed = evaluate(model, guide, x, y, num_samples=40, chunk_size=chunk)
    pyro.set_rng_seed(5)
    held = regression_report(predict(model, guide, x, y, num_samples=40, chunk_size=chunk, return_sites=()))
    for key in ("rmse", "test_ll", "miscalibration_area"):
        assert getattr(streamed, key) == pytest.approx(getattr(held, key), rel=1e-6), key
    assert streamed.coverage == pytest.approx(held.coverage)
    assert torch.allclose(streamed.epistemic_variance, held.epistemic_variance, rtol=1e-4, atol=1e-7)
    assert torch.allclose(streamed.log_likelihood, held.log_likelihood, rtol=1e-5, atol=1e-6)
    assert streamed.crps == pytest.approx(held.crps, rel=1e-6 if chunk is None else 2e-2)


def test_evaluate_streams_the_same_classification_scores():
    from pyro_dropout import evaluate, predict
    from pyro_dropout.metrics import classification_report

    model, guide, x, y = _trained("classification")
    pyro.set_rng_seed(5)
    streamed = evaluate(model, guide, x, y, num_samples=30, chunk_size=8)
    pyro.set_rng_seed(5)
    held = classification_report(predict(model, guide, x, y, num_samples=30, chunk_size=8, return_sites=()))
    for key in ("accuracy", "nll", "brier", "ece"):
        assert getattr(streamed, key) == pytest.approx(getattr(held, key), rel=1e-6), key
    assert streamed.misclassification_auroc == pytest.approx(held.misclassification_auroc, rel=1e-6)
    for key, value in held.scores.items():
        assert torch.allclose(streamed.scores[key].double(), value.double(), atol=1e-6), key


def test_streaming_log_mean_exp_and_bad_arguments():
    from pyro_dropout import evaluate
    from pyro_dropout.metrics import LogMeanExp
    from pyro_dropout.ops import log_mean_exp

    x = torch.tensor([[-1e4, 0.0], [-1e4, -math.inf], [3.0, -math.inf]], dtype=torch.float64)
    running = LogMeanExp()
    for part in (x[:1], x[1:]):
        running.update(part)
    assert torch.allclose(running.value(), log_mean_exp(x, dim=0))
    model, guide, xs, ys = _trained("regression")
    with pytest.raises(ValueError, match="num_samples must be a positive int"):
        evaluate(model, guide, xs, ys, num_samples=0)
    with pytest.raises(ValueError, match="chunk_size must be a positive int"):
        evaluate(model, guide, xs, ys, chunk_size=0)
