"""tools/uci_final_stage.py: a stored UCI result reproduces from its file, and another seed moves it."""

import json
from dataclasses import replace

import pytest

from pyro_dropout_experiments.uci import UCIBenchmark, run_uci
from pyro_dropout_experiments.uci.methods import ConcreteOptions
from tests.scripts import load_script
from tests.uci_data import TINY, tiny_method, write_tiny_uci


def _stored_run(tmp_path, splits, settings=TINY):
    """Tiny UCI data under ``tmp_path`` and MC dropout's results on ``splits``: ``(data root, results)``."""
    root = write_tiny_uci(tmp_path)
    out = tmp_path / "results"
    run_uci(
        UCIBenchmark.load("tiny", root), tiny_method("mc-dropout"), splits, out, settings, log=lambda _: None
    )
    return root, out


def test_final_stage_reproduces_the_stored_result(tmp_path):
    root, out = _stored_run(tmp_path, [0, 1])
    tool = load_script("tools", "uci_final_stage")
    args = ["tiny", "0-1", "--results", str(out), "--data-dir", str(root)]
    same = tool.main(args)
    assert [r["split"] for r in same] == [0, 1]
    for r in same:  # the protocol is deterministic given its seed: equal to the last digit
        assert r["now"] == r["stored"]
    lines = []
    watched = tool.final_stage("tiny", [0, 1], "mc-dropout", out, None, str(root), every=1, log=lines.append)
    assert [r["now"] for r in watched] == [r["now"] for r in same]  # watching leaves the result alone
    assert len(lines) == 2 and lines[0].startswith("epoch 1, RMSE")  # 2 epochs: n_epochs.txt x 1
    other = tool.main([*args, "--seed", "1"])
    assert all(r["now"]["test_ll"] != r["stored"]["test_ll"] for r in other)


def test_final_stage_of_a_per_draw_result_made_before_the_setting(tmp_path):
    """A file without ``per_example_masks`` was trained with one mask per draw, and re-runs so."""
    root, out = _stored_run(tmp_path, [0], replace(TINY, per_example_masks=False))
    path = out / "tiny_mc-dropout-per-draw_split00.json"
    stored = json.loads(path.read_text())
    del stored["settings"]["per_example_masks"]
    path.write_text(json.dumps(stored))
    tool = load_script("tools", "uci_final_stage")
    (row,) = tool.main(
        ["tiny", "0", "--method", "mc-dropout-per-draw", "--results", str(out), "--data-dir", str(root)]
    )
    assert row["now"] == row["stored"]


def test_final_stage_names_what_it_cannot_do(tmp_path):
    root = write_tiny_uci(tmp_path)
    tool = load_script("tools", "uci_final_stage")
    with pytest.raises(FileNotFoundError, match="no result file"):
        tool.main(["tiny", "0", "--results", str(tmp_path / "none"), "--data-dir", str(root)])
    with pytest.raises(ValueError, match="not one network per split"):
        tool.final_stage("tiny", [0], "ensemble", tmp_path, None, str(root))


def test_paired_comparison_with_the_published_per_split_results(tmp_path, capsys):
    tool = load_script("tools", "uci_paired")
    published = json.loads(tool.PUBLISHED.read_text())["kin8nm"]
    shifts = {0: 0.01, 3: 0.03, 7: -0.01}  # ours = published + shift, on three splits
    for split, shift in shifts.items():
        record = {
            "split": split,
            "rmse": published["rmse"][split] - shift / 10,
            "test_ll": published["test_ll"][split] + shift,
        }
        (tmp_path / f"kin8nm_mc-dropout_split{split:02d}.json").write_text(json.dumps(record))
    # a finished grid search waiting for its final model is not a result
    (tmp_path / "kin8nm_mc-dropout_split05.grid.json").write_text(json.dumps({"split": 5, "validation": []}))
    out = tool.main(["kin8nm", "--results", str(tmp_path)])
    d = list(shifts.values())
    mean = sum(d) / 3
    se = (sum((x - mean) ** 2 for x in d) / 2 / 3) ** 0.5
    assert out["test_ll"]["n"] == 3 and out["test_ll"]["mean"] == pytest.approx(mean)
    assert out["test_ll"]["se"] == pytest.approx(se)
    assert out["rmse"]["mean"] == pytest.approx(-mean / 10)
    assert "split  3" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="no results"):
        tool.main(["kin8nm", "--method", "concrete", "--results", str(tmp_path)])
    with pytest.raises(SystemExit, match="no published"):
        tool.main(["wine-quality-red", "--results", str(tmp_path)])


def test_paired_comparison_of_two_methods_on_the_splits_both_ran(tmp_path, capsys):
    tool = load_script("tools", "uci_paired")
    runs = {"bbalpha-1": {0: -2.3, 1: -2.2, 2: -2.4}, "mc-dropout": {1: -2.4, 2: -2.6, 3: -2.0}}
    for method, lls in runs.items():
        for split, ll in lls.items():
            record = {"split": split, "rmse": 3.0, "test_ll": ll, "coverage_90": 0.9}
            (tmp_path / f"boston_{method}_split{split:02d}.json").write_text(json.dumps(record))
    out = tool.main(
        ["boston", "--method", "bbalpha-1", "--against", "mc-dropout", "--results", str(tmp_path)]
    )
    assert out["test_ll"]["n"] == 2  # splits 1 and 2 only
    assert out["test_ll"]["mean"] == pytest.approx(0.2) and out["test_ll"]["se"] == pytest.approx(
        0.0, abs=1e-12
    )
    assert out["rmse"]["mean"] == 0.0 and out["coverage_90"]["mean"] == 0.0
    assert "bbalpha-1 - mc-dropout = +0.2000" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="share no split"):
        (tmp_path / "boston_hmc_split09.json").write_text(json.dumps({"split": 9, "rmse": 1, "test_ll": 1}))
        tool.main(["boston", "--method", "hmc", "--against", "mc-dropout", "--results", str(tmp_path)])


def test_grid_stage_reproduces_the_stored_validation_and_compares_a_change(tmp_path, capsys):
    root, out = _stored_run(tmp_path, [0, 1])
    tool = load_script("tools", "uci_grid_stage")
    args = ["tiny", "0-1", "--results", str(out), "--data-dir", str(root)]
    same = tool.main(args)
    for r in same["splits"]:  # the grid search is deterministic given its seed
        assert all(p["now"] == p["stored"] for p in r["points"]) and len(r["points"]) == 4
    assert same["best"] == (0.0, 0.0) and same["average_point"] == (0.0, 0.0)
    glorot = tool.main([*args, "--set", "init=glorot"])
    assert glorot["settings"] == {"init": "glorot"}
    for r in glorot["splits"]:
        assert all(p["now"] != p["stored"] for p in r["points"])
        assert r["best_now"] == max(p["now"] for p in r["points"])
        diffs = [p["now"] - p["stored"] for p in r["points"]]
        assert r["mean_difference"] == pytest.approx(sum(diffs) / len(diffs))
    assert "best grid point" in capsys.readouterr().out
    # Concrete dropout's grid is its length-scale and held tau (its rows also hold the measured tau)
    run_uci(UCIBenchmark.load("tiny", root), tiny_method("concrete"), [0], out, TINY, log=lambda _: None)
    concrete = tool.main(
        ["tiny", "0", "--method", "concrete", "--results", str(out), "--data-dir", str(root)]
    )
    (row,) = concrete["splits"]
    o = ConcreteOptions()
    assert [p["hyper"] for p in row["points"]] == [
        {"length_scale": v, "tau_train": t} for v in o.length_scales for t in o.tau_grid
    ]
    assert all(p["now"] == p["stored"] for p in row["points"])


def test_grid_stage_names_what_it_cannot_do(tmp_path):
    tool = load_script("tools", "uci_grid_stage")
    assert tool.parse_override("init=glorot") == ("init", "glorot")
    assert tool.parse_override("per_example_masks=false") == ("per_example_masks", False)
    assert tool.parse_override("lr=0.01") == ("lr", 0.01)
    assert tool.parse_override("concrete_length_scales=0.1,1") == ("concrete_length_scales", (0.1, 1.0))
    with pytest.raises(ValueError, match="KEY one of"):
        tool.parse_override("no_such_setting=1")
    with pytest.raises(ValueError, match="true or false"):
        tool.parse_override("per_example_masks=maybe")
    with pytest.raises(SystemExit):
        tool.main(["tiny", "0", "--set", "init"])
    root = write_tiny_uci(tmp_path)
    with pytest.raises(FileNotFoundError, match="no result file"):
        tool.main(["tiny", "0", "--results", str(tmp_path / "none"), "--data-dir", str(root)])


COMMAND_CATEGORIES = ("command flags", "command data", "command paths", "results")
DEFECTS = ("unsafe", "silent wrong", "unnamed error", "raw traceback")


def test_every_probe_of_bad_input_ends_handled_or_with_a_clear_error(capsys):
    """tools/probe_inputs.py: about 400 bad or extreme inputs to the public API, the surfaces
    added since (recurrent layers, attacks, policies, SVIModule, labels, export, image files),
    the traced losses, round 4's (active learning, saved states) and the fast paths' bad uses;
    none may end in a silent wrong answer, an error that names nothing, or a
    raw traceback (the first wave's old code had 16, 18 and 18; the later surfaces' 33, 61, 13)."""
    counts = load_script("tools", "probe_inputs").main([w for c in COMMAND_CATEGORIES for w in ("--skip", c)])
    out = capsys.readouterr().out
    assert counts["handled"] + counts["clear error"] >= 390, out
    for defect in DEFECTS:
        assert counts[defect] == 0, out


@pytest.mark.slow
def test_every_command_probe_ends_in_a_clear_line_and_loses_nothing(capsys):
    """The commands' probes: bad flags, hostile data files and results folders (another
    command's results, other settings, links out of --out); none may lose a result (6 did)."""
    counts = load_script("tools", "probe_inputs").main([w for c in COMMAND_CATEGORIES for w in ("--only", c)])
    out = capsys.readouterr().out
    assert counts["handled"] + counts["clear error"] >= 30, out
    for defect in DEFECTS:
        assert counts[defect] == 0, out


def test_the_performance_figure_is_drawn_from_the_stored_runs(tmp_path):
    tool = load_script("tools", "performance_figure")
    out = tool.main([str(tmp_path / "performance.png")])
    assert out.stat().st_size > 20_000
    # every path it plots has a ratio in every stored run of the benchmark of record
    runs = tool.speed_record_tool().load(tool.RECORD)
    assert all(tool.speed_record_tool().ratios(runs, kind, list(tool.CASES)) for kind in tool.TRAINING)


def test_the_layout_check_names_a_missing_browser_and_how_to_get_one(tmp_path, capsys):
    tool = load_script("tools", "docs_layout")
    assert tool.main([str(tmp_path), "--browser", str(tmp_path / "chromium")]) == 2
    said = capsys.readouterr().err
    assert f"no Chromium at {tmp_path / 'chromium'}" in said and "apt-get install chromium" in said
