"""``pyro-dropout download``: names expanded, each set fetched once into the layout the commands
read, and what has no public source named with where to put it."""

import pytest

from pyro_dropout.datasets import UCI_DATASETS, default_data_dir
from pyro_dropout_experiments.cli import main
from pyro_dropout_experiments.data import command


def test_names_expand_and_each_set_is_fetched_once(tmp_path, capsys, monkeypatch):
    fetched = []
    monkeypatch.setattr(
        command,
        "_fetchers",
        lambda: {n: lambda d, n=n: fetched.append(n) or d / n for n in [*command.SETS, *UCI_DATASETS]},
    )
    assert main(["download", "uci", "bostonHousing", "co2", "--data-dir", str(tmp_path)]) == 0
    assert fetched == [*UCI_DATASETS, "co2"]
    fetched.clear()
    assert main(["download", "all", "--data-dir", str(tmp_path)]) == 0
    assert sorted(fetched) == sorted([*UCI_DATASETS, "mnist", "fashion-mnist", "co2"])
    assert "notMNIST_small" in capsys.readouterr().out  # what to place by hand is said


@pytest.mark.parametrize(("name", "said"), [("solar", "irradiance_data.txt"), ("mnst", "known: all, uci")])
def test_a_set_without_a_download_is_named_with_its_way(tmp_path, capsys, name, said):
    with pytest.raises(SystemExit) as stop:  # refused when parsed
        main(["download", name, "--data-dir", str(tmp_path)])
    assert stop.value.code == 2
    assert said in capsys.readouterr().err


def test_co2_from_a_mirror_lands_where_the_co2_command_reads_it(tmp_path, monkeypatch):
    real = default_data_dir() / "co2" / "co2.csv"
    if not real.is_file():
        pytest.skip("the CO2 file is not here")
    monkeypatch.setattr("pyro_dropout.datasets.download._installed_co2", lambda: None)
    monkeypatch.setattr("pyro_dropout.datasets.download.CO2_SOURCE", real.as_uri())
    assert main(["download", "co2", "--data-dir", str(tmp_path)]) == 0
    assert (tmp_path / "co2" / "co2.csv").read_bytes() == real.read_bytes()
