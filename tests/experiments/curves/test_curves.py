"""The one-dimensional experiments on tiny settings: what they write, and what must hold whatever
the training (the GP's growing sd, weight averaging's constant one, the draws kept apart)."""

import json
import math

import numpy as np
import pytest
import torch

from pyro_dropout.baselines import fit_gp, gp_predictive
from pyro_dropout_experiments.cli import main
from pyro_dropout_experiments.curves import CurveSettings, fit_curves, mc_predictive
from pyro_dropout_experiments.curves.co2 import co2_data
from pyro_dropout_experiments.curves.solar import SOLAR_GAPS, solar_data

TINY = [
    "--width",
    "8",
    "--layers",
    "2",
    "--steps",
    "30",
    "--num-samples",
    "20",
    "--gp-steps",
    "100",
    "--quiet",
]


def test_the_gp_is_sure_near_its_data_and_unsure_far_from_it():
    x = torch.linspace(-2, 2, 40).unsqueeze(-1)
    y = torch.sin(2 * x[:, 0]) + 0.05 * torch.randn(40, generator=torch.Generator().manual_seed(0))
    gp = fit_gp(x, y, steps=300)
    mean, sd = gp_predictive(gp, torch.tensor([[0.3], [6.0]]))
    assert abs(mean[0] - math.sin(0.6)) < 0.1  # interpolates
    assert sd[1] > 5 * sd[0]  # six units away, many length-scales: back near the prior's sd
    with pytest.raises(ValueError, match=r"x must be \[n, d\] and y \[n\]"):
        fit_gp(x[:, 0], y)


def test_co2_command_writes_every_model_and_the_figure(tmp_path, capsys):
    assert main(["co2", *TINY, "--out", str(tmp_path)]) == 0
    results = json.loads((tmp_path / "results.json").read_text())
    assert (tmp_path / "co2.png").stat().st_size > 10_000
    names = {"relu-p0.1", "relu-p0.2", "tanh-p0.1", "tanh-p0.2", "relu-p0.1-standard", "relu-p0.1-T10", "gp"}
    assert set(results["models"]) == names
    _t, _, train = co2_data()
    assert (results["data"]["train"], results["data"]["test"]) == (train.sum(), (~train).sum()) == (207, 72)
    for model in results["models"].values():
        assert len(model["mean"]) == len(model["sd"]) == len(results["grid"])
        assert model["sd_ratio"] == pytest.approx(model["sd_far"] / model["sd_inside"])
    # weight averaging has no spread of draws: its sd is the noise alone, the same everywhere
    assert results["models"]["relu-p0.1-standard"]["sd_ratio"] == pytest.approx(1.0, abs=1e-5)
    # the GP's sd grows far from the data (its kernel forgets), whatever its fit
    assert results["models"]["gp"]["sd_ratio"] > 2
    # ten draws are the first ten of the T = 20, not the same predictive
    assert results["models"]["relu-p0.1-T10"]["mean"] != results["models"]["relu-p0.1"]["mean"]
    assert "sd far / inside the training range" in capsys.readouterr().out


def test_solar_command_holds_out_the_gaps(tmp_path):
    t, _, train = solar_data()
    assert (~train).sum() == 125 and all(((t >= lo) & (t <= hi)).sum() == 25 for lo, hi in SOLAR_GAPS)
    assert main(["solar", *TINY, "--out", str(tmp_path)]) == 0
    results = json.loads((tmp_path / "results.json").read_text())
    assert (tmp_path / "solar.png").is_file()
    assert results["data"]["train"] == 266 and len(results["models"]["gp"]["mean"]) == 391
    gp = results["models"]["gp"]
    assert gp["sd_gaps"] > gp["sd_outside"]  # 25-year gaps are several of its length-scales
    assert math.isfinite(results["models"]["relu-p0.1"]["gaps"]["test_ll"])


def test_synthetic_command_learns_p_per_layer_for_each_size(tmp_path, capsys):
    args = ["synthetic", "--width", "8", "--steps", "20", "--num-samples", "10", "--sizes", "10,40"]
    assert main([*args, "--repeats", "2", "--quiet", "--out", str(tmp_path)]) == 0
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["sizes"] == [10, 40] and (tmp_path / "synthetic.png").is_file()
    assert results["settings"]["layers"] == 3  # the study's own default, not the CO2 networks' 5
    assert set(results["p"]) == {"hidden.1.weight", "hidden.2.weight", "output.weight"}  # inputs not dropped
    for key in ("epistemic", "aleatoric", "predictive"):
        assert len(results[key]) == 2 and all(v > 0 for v in results[key])
        assert len(results["per_size"]["40"][key]) == 2  # one value per repeat
    one = results["per_size"]["40"]  # per repeat: predictive variance = epistemic + aleatoric
    parts = np.asarray(one["epistemic"]) ** 2 + np.asarray(one["aleatoric"]) ** 2
    assert np.asarray(one["predictive"]) ** 2 == pytest.approx(parts, rel=1e-5)
    assert len(results["per_size"]["10"]["example"]["x"]) == 10
    assert "N =     40" in capsys.readouterr().out
    # a rerun keeps the sizes made and runs the new ones; other settings are refused
    kept = results["per_size"]["10"]
    assert main([*args[:-1], "10,20", "--repeats", "2", "--quiet", "--out", str(tmp_path)]) == 0
    again = json.loads((tmp_path / "results.json").read_text())
    assert again["sizes"] == [10, 20, 40] and again["per_size"]["10"] == kept  # its seconds too: kept
    assert main([*args, "--repeats", "3", "--quiet", "--out", str(tmp_path)]) == 2


def test_runs_may_have_their_own_rows_and_a_mismatch_is_named():
    s = CurveSettings(width=4, layers=1, steps=2, num_samples=5)
    x = np.random.default_rng(0).normal(size=(2, 6, 1))
    fitted = fit_curves(x, x[..., 0] * 2, (0.1, 0.2), s, progress=False)
    pred = mc_predictive(fitted, np.linspace(-1, 1, 3), 5)
    assert pred.means.shape == (5, 2, 3) and (pred.sd >= pred.epistemic).all()
    with pytest.raises(ValueError, match=r"do not make 3 runs of rows"):
        fit_curves(x, x[..., 0], (0.1, 0.2, 0.3), s, progress=False)


def test_quick_applies_to_the_settings_not_given(tmp_path, monkeypatch):
    from pyro_dropout_experiments.curves import co2 as module

    seen = []
    monkeypatch.setattr(module, "run_co2", lambda s, *a: seen.append(s) or {"models": {}})
    main(["co2", "--quick", "--width", "32", "--out", str(tmp_path)])
    assert (seen[0].width, seen[0].layers, seen[0].steps) == (32, 4, 3000)
    with pytest.raises(SystemExit):
        main(["synthetic", "--sizes", "1,10"])
