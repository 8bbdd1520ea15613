"""The CO2 and solar readers: the shared files, and hostile ones named by file and line."""

import numpy as np
import pytest

from pyro_dropout.datasets import linear_noise, load_co2, load_solar


def test_the_shared_series_read_as_documented():
    co2 = load_co2(None)
    assert len(co2.t) == 2225  # 2,284 weeks, 59 of them missing
    assert co2.y[0] == pytest.approx(316.1) and 1958.2 < co2.t[0] < 1958.3 and co2.t[-1] < 2002
    solar = load_solar(None)
    assert len(solar.t) == 391 and solar.t[0] == 1610 and solar.t[-1] == 2000
    assert solar.y[0] == pytest.approx(1364.7338)
    assert load_solar(None, column="11yrCYCLE").y[0] == pytest.approx(1365.8477)


@pytest.mark.parametrize(
    "text, message",
    [
        ("date,co2\n19580329,316.1\n19580405,abc\n", r"co2\.csv, line 3: 'abc' is not a number"),
        ("date,co2\n19580329,316.1\n19581305,1\n", r"line 3: '19581305' is not a date"),
        ("day,value\n19580329,316.1\n", r"line 1: expected the header 'date,co2'"),
        ("date,co2\n19580405,1\n19580329,2\n", "the times are not increasing"),
        ("date,co2\n19580329,1,2\n", r"line 2: expected 'date,co2'"),
        ("date,co2\n19580329,inf\n19580405,1\n", r"line 2: 'inf' is not a finite number"),
    ],
)
def test_a_hostile_co2_file_is_an_error_naming_the_file_and_line(tmp_path, text, message):
    (tmp_path / "co2").mkdir()
    (tmp_path / "co2" / "co2.csv").write_text(text)
    with pytest.raises(ValueError, match=message):
        load_co2(tmp_path)


def test_missing_weeks_are_skipped_and_missing_files_named(tmp_path):
    (tmp_path / "co2").mkdir()
    (tmp_path / "co2" / "co2.csv").write_text("date,co2\n19580329,316.1\n19580405,\n19580412,317.6\n")
    assert load_co2(tmp_path).y.tolist() == [316.1, 317.6]  # the empty week is not read as 0
    with pytest.raises(FileNotFoundError, match=r"solar/irradiance_data\.txt: no such file"):
        load_solar(tmp_path)
    (tmp_path / "solar").mkdir()
    (tmp_path / "solar" / "irradiance_data.txt").write_text("YEAR A\n1610 1\n1611 2 3\n")
    with pytest.raises(ValueError, match="with the column '11yrCYCLE"):
        load_solar(tmp_path)
    with pytest.raises(ValueError, match="line 3: expected 2 columns, got 3"):
        load_solar(tmp_path, column="A")


def test_linear_noise_is_paper_001s_line():
    x, y = linear_noise(20000, seed=3)
    slope, intercept = np.polyfit(x[:, 0], y, 1)
    # 20,000 points with unit noise: the fitted line within 5 standard errors (about 0.007 each)
    assert slope == pytest.approx(2.0, abs=0.04) and intercept == pytest.approx(8.0, abs=0.04)
    assert np.std(y - 2 * x[:, 0] - 8) == pytest.approx(1.0, abs=0.03)
    with pytest.raises(ValueError, match="n >= 1"):
        linear_noise(0)
