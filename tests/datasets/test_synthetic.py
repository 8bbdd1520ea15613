"""Synthetic data in the UCI layout: it loads with the benchmark's own reader, splits disjoint."""

import numpy as np
import pytest

from pyro_dropout.datasets import load_uci, low_noise_regression, write_uci_folder
from pyro_dropout_experiments.uci import UCIBenchmark


def test_the_low_noise_target_is_smooth_with_the_noise_asked_for():
    x, y = low_noise_regression(rows=400, noise_sd=0.0, seed=1)
    _, noisy = low_noise_regression(rows=400, noise_sd=0.3, seed=1)
    assert x.shape == (400, 8) and y.shape == (400,)
    assert 5 < y.std() < 9  # the target's spread; the noise is 0.3 of it
    assert np.std(noisy - y) == pytest.approx(0.3, rel=0.15)  # 400 draws: sd within ~7% (2 se)


def test_a_written_folder_loads_with_its_splits_and_grids(tmp_path):
    x, y = low_noise_regression(rows=100)
    write_uci_folder(tmp_path, "sim", x, y, splits=3, test_fraction=0.2, tau_values=(5.0, 10.0))
    data = load_uci("sim", tmp_path)
    assert data.x.shape == (100, 8) and data.n_splits == 3
    np.testing.assert_allclose(np.asarray(data.y), y, rtol=1e-6)
    for split in data.splits:
        assert len(split.test) == 20 and len(set(split.train.tolist()) | set(split.test.tolist())) == 100
    settings = UCIBenchmark.load("sim", tmp_path)
    assert list(settings.tau_values) == [5.0, 10.0] and settings.n_hidden == 50


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda p: write_uci_folder(p, "a", np.zeros((5, 2)), np.zeros(4)), r"x \[rows, features\]"),
        (
            lambda p: write_uci_folder(p, "a", np.zeros((5, 2)), np.zeros(5), test_fraction=1.0),
            "test_fraction",
        ),
        (lambda p: low_noise_regression(rows=5), "rows >= 20"),
    ],
)
def test_bad_arguments_are_named(tmp_path, call, match):
    with pytest.raises(ValueError, match=match):
        call(tmp_path)


def test_a_name_that_is_a_path_or_data_that_is_not_finite_is_refused(tmp_path):
    x, y = np.zeros((10, 2)), np.zeros(10)
    for name in ("../../x", "a/b", "..", ""):
        with pytest.raises(ValueError, match="is not a plain folder name"):
            write_uci_folder(tmp_path / "root", name, x, y)
    x[3, 1] = np.nan
    with pytest.raises(ValueError, match="x and y hold NaN or infinite values"):
        write_uci_folder(tmp_path / "root", "ok", x, y)
    assert not any(tmp_path.rglob("data.txt"))  # nothing written, inside root or out of it
