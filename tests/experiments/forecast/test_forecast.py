"""``pyro-dropout forecast`` on tiny settings: the windows, the trajectories and what it writes."""

import json

import numpy as np
import pytest
import torch

from pyro_dropout_experiments.cli import main
from pyro_dropout_experiments.forecast import ForecastSettings, co2_increments, forecast_scores

TINY = ["--steps", "60", "--num-samples", "30", "--hidden", "8", "--horizon", "40", "--quiet"]


def test_the_windows_are_past_standardised_increments_and_the_next_one():
    s = ForecastSettings(window=10)
    data = co2_increments(s)
    history = data.z[data.train]
    windows = len(history) - 10
    assert len(data.val_x) == round(0.1 * windows) and len(data.x) + len(data.val_x) == windows
    assert data.x.shape[1:] == (10, 1) and data.y.shape == (len(data.x),)
    assert torch.allclose(data.val_x[-1, :, 0], torch.tensor(history[-11:-1], dtype=torch.float32))
    assert float(data.val_y[-1]) == pytest.approx(history[-1], rel=1e-6)  # the latest are held out
    assert torch.allclose(data.x[3, :, 0], torch.tensor(history[3:13], dtype=torch.float32))
    assert float(data.y[3]) == pytest.approx(history[13], rel=1e-6)
    assert abs(history.mean()) < 1e-9 and history.std() == pytest.approx(1.0)
    levels = data.level[0] + np.cumsum(data.z[1:] * data.sd + data.mu)  # the increments undo
    assert np.allclose(levels, data.level[1:])


def test_forecast_writes_a_band_that_widens_with_the_horizon(tmp_path, capsys):
    assert main(["forecast", *TINY, "--out", str(tmp_path)]) == 0
    results = json.loads((tmp_path / "results.json").read_text())
    assert len(results["mean"]) == len(results["sd"]) == len(results["times"]) == 40
    assert results["times"][0] > 1991 and results["sd_end"] > results["sd_one_year"] > 0
    assert results["scores"]["readings"] == 40 and 0 <= results["scores"]["coverage_95"] <= 1
    assert (tmp_path / "forecast.png").stat().st_size > 10_000
    assert "a year ahead" in capsys.readouterr().out


def test_scores_against_a_hand_computation():
    draws = torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=torch.float64)
    scores = forecast_scores(draws, np.array([2.0, 5.0, 9.0]))
    assert scores["readings"] == 2 and scores["rmse"] == pytest.approx(np.sqrt((0 + 4) / 2))
    sd = np.sqrt(2.0)  # each column's sample sd
    expected = np.mean([-0.5 * np.log(2 * np.pi * sd**2) - d**2 / (2 * sd**2) for d in (0.0, 2.0)])
    assert scores["test_ll"] == pytest.approx(expected)


def test_a_window_longer_than_the_training_series_is_named(capsys):
    assert main(["forecast", "--window", "5000", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "412 increments (of every 4-th reading) before --train-end 1991.0" in err
    assert "leave no training window of 5000; lower --window or --every" in err
