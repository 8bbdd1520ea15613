"""The UCI protocol on a tiny synthetic data set in the standard layout."""

import json
import math
import os
from dataclasses import replace

import pyro
import pytest
import torch

from pyro_dropout.cli import main, parse_splits
from pyro_dropout.datasets import download_uci, load_uci, uci_directory
from pyro_dropout.experiments import uci as uci_module
from pyro_dropout.experiments import uci_methods
from pyro_dropout.experiments.uci import grid_points, run_uci
from pyro_dropout.experiments.uci_plot import plot_uci
from pyro_dropout.experiments.uci_table import collect, label, markdown_table, parse_label, summarise
from pyro_dropout.experiments.vectorised import Standardiser, draws_per_chunk, score_runs
from pyro_dropout.metrics import gaussian_log_likelihood
from tests.uci_data import TINY, write_tiny_uci


@pytest.fixture
def tiny(tmp_path):
    """60 rows: 3 informative features, 1 constant column, target last; 3 splits of 50/10 rows."""
    return write_tiny_uci(tmp_path)


def test_loader_and_missing_data(tiny, tmp_path):
    data = load_uci("tiny", tiny)
    assert data.x.shape == (60, 4) and data.n_splits == 3 and data.n_hidden == 8
    assert data.dropout_rates == [0.01, 0.1] and data.tau_values == [0.5, 2.0]
    with pytest.raises(FileNotFoundError, match="download-uci"):
        uci_directory("bostonHousing", tmp_path / "empty")


def test_mc_dropout_protocol_grid_retrain_and_resume(tiny, monkeypatch):
    data = load_uci("tiny", tiny)
    seen = []
    original = uci_module.train_and_score

    def spy(data_, method, specs, s, num_samples, desc, **kw):
        seen.append(
            (desc, [(sp.split, len(sp.train), len(sp.score), sp.p, sp.tau) for sp in specs], num_samples)
        )
        return original(data_, method, specs, s, num_samples, desc, **kw)

    monkeypatch.setattr(uci_module, "train_and_score", spy)
    out = tiny / "results"
    results = run_uci(data, "mc-dropout", [0, 2], out, TINY, log=lambda m: None)
    grid, final = seen
    # the grid: 2 splits x 4 (p, tau) pairs, trained on the first 80% (40 rows), validated on the last 10
    assert len(grid[1]) == 8 and {r[1:3] for r in grid[1]} == {(40, 10)} and grid[2] == 20
    # the final runs: the whole training split (50 rows), the test split (10 rows), T = num_samples
    assert {r[1:3] for r in final[1]} == {(50, 10)} and final[2] == 40
    for r in results:
        assert (r["p"], r["tau"]) in {(p, t) for p in data.dropout_rates for t in data.tau_values}
        best = max(r["validation"], key=lambda v: v["test_ll"])
        assert (best["p"], best["tau"]) == (r["p"], r["tau"])
        assert {"dataset", "method", "split", "rmse", "rmse_standard", "test_ll", "seconds"} <= set(r)
        assert all(math.isfinite(r[k]) for k in ("rmse", "rmse_standard", "test_ll"))
    files = sorted(p.name for p in out.iterdir())
    assert files == ["tiny_mc-dropout_split00.json", "tiny_mc-dropout_split02.json"]
    # resumable: finished splits are kept, only split 1 trains
    seen.clear()
    run_uci(data, "mc-dropout", [0, 1, 2], out, TINY, log=lambda m: None)
    assert [r[0] for r in seen[1][1]] == [1]
    # a kept split must come from the same command-line settings: another seed is an error
    with pytest.raises(ValueError, match=r"split00\.json was made with seed=0 but this run has seed=1"):
        run_uci(data, "mc-dropout", [0], out, replace(TINY, seed=1), log=lambda m: None)


def _spy_on_build(monkeypatch, part):
    """A list that collects ``part`` (1: the guide, 2: the loss) of every model the protocol builds."""
    seen = []
    original = uci_methods._build

    def spy(*args):
        built = original(*args)
        seen.append(built[part])
        return built

    monkeypatch.setattr(uci_methods, "_build", spy)
    return seen


@pytest.mark.parametrize("method", ["mc-dropout", "bbalpha-1", "concrete"])
def test_masks_per_example_by_default_and_per_draw_on_request(tiny, method, monkeypatch):
    data = load_uci("tiny", tiny)
    losses = _spy_on_build(monkeypatch, part=2)
    assert TINY.per_example_masks  # the protocol's default, as in the published code
    (result,) = run_uci(data, method, [0], tiny / "out", TINY, log=lambda m: None)
    assert losses and all(loss.per_example_masks for loss in losses)
    assert result["settings"]["per_example_masks"] is True and math.isfinite(result["test_ll"])
    losses.clear()
    run_uci(data, method, [0], tiny / "out", replace(TINY, per_example_masks=False), log=lambda m: None)
    assert losses and not any(loss.per_example_masks for loss in losses)
    # the two estimators keep separate files in one folder, and the table labels them apart
    names = sorted(p.name for p in (tiny / "out").iterdir())
    assert names == [f"tiny_{method}-per-draw_split00.json", f"tiny_{method}_split00.json"]
    table = markdown_table(collect(tiny / "out"))
    assert f"| data set | {method} | {method}-per-draw |" in table


def test_labels_and_results_made_before_the_setting():
    assert label("mc-dropout", True) == "mc-dropout" and label("mc-dropout", False) == "mc-dropout-per-draw"
    assert label("sgp", False) == "sgp" and label("mfvi", True) == "mfvi"  # no masks, one name
    assert parse_label("bbalpha-0.5-per-draw") == ("bbalpha-0.5", False, 1, True)
    assert parse_label("bbalpha-0.5") == ("bbalpha-0.5", True, 1, True)
    # more hidden layers than the protocol's one: a suffix after the masks'
    assert label("mc-dropout", False, 2) == "mc-dropout-per-draw-2-layers"
    assert label("sgp", True, 2) == "sgp"  # a GP has no layers
    assert label("mc-dropout", True, 1, False) == "mc-dropout-grid-network"
    for args in [("concrete", True, 2, True), ("mc-dropout", False, 3, False), ("hmc", True, 2, True)]:
        assert parse_label(label(*args)) == args
    assert parse_label("mfvi") == ("mfvi", True, 1, True)
    # a result file without the setting was trained with one mask per draw
    row = {"dataset": "d", "method": "mc-dropout", "rmse": 1.0, "rmse_standard": 1.0, "test_ll": -1.0}
    assert set(summarise([{**row, "settings": {"seed": 0}}])) == {("d", "mc-dropout-per-draw")}


def test_wall_time_cells_say_which_runs_were_on_a_gpu():
    def row(split, device):
        settings = {"per_example_masks": True, "device": device}
        row = {"dataset": "d", "method": "sgp", "split": split, "rmse": 1.0, "rmse_standard": None}
        return row | {"test_ll": -1.0, "protocol_seconds": 120.0, "settings": settings}

    def timing_row(rows):
        return next(line for line in markdown_table(rows).splitlines() if line.startswith("| d | 2 · "))

    assert timing_row([row(0, "cpu"), row(1, "cpu")]) == "| d | 2 · 2.0 min |"
    assert timing_row([row(0, "cuda"), row(1, "cuda:0")]) == "| d | 2 · 2.0 min (GPU) |"
    assert timing_row([row(0, "cpu"), row(1, "cuda")]) == "| d | 2 · 2.0 min (1 split on a GPU) |"
    assert summarise([row(0, "cuda")])[("d", "sgp")]["gpu_splits"] == 1


def test_runs_made_in_several_groups_list_each_group():
    def row(split, seconds, resumed=0.0):
        settings = {"per_example_masks": True}
        row = {"dataset": "d", "method": "sgp", "split": split, "rmse": 1.0, "rmse_standard": None}
        row |= {"test_ll": -1.0, "protocol_seconds": seconds, "resumed_training_seconds": resumed}
        return row | {"settings": settings}

    # splits 0-2 and 5 trained in one command (90 s), 3-4 in another that resumed 30 s of training
    rows = [row(0, 90.0), row(1, 90.0), row(2, 90.0), row(5, 90.0), row(3, 150.0, 30.0), row(4, 150.0, 30.0)]
    s = summarise(rows)[("d", "sgp")]
    assert s["protocol_seconds"] == 240.0 and s["splits"] == 6
    assert [g["splits"] for g in s["groups"]] == [[0, 1, 2, 5], [3, 4]]
    table = markdown_table(rows)
    assert "| d | sgp | 2 | 0-2, 5: 1.5 min; 3-4: 2.5 min (0.5 before a resume) |" in table
    # one group: nothing to list
    assert "several groups" not in markdown_table(rows[:4])


@pytest.mark.parametrize("method", ["mc-dropout", "ensemble"])
def test_grid_network_scored_as_the_published_code_does(tiny, method, monkeypatch):
    data = load_uci("tiny", tiny)
    seen = []
    original = uci_module.train_and_score

    def spy(data_, method_, specs, s, num_samples, desc, **kw):
        seen.append(
            [
                (sp.split, len(sp.train), len(sp.score), None if sp.test is None else len(sp.test))
                for sp in specs
            ]
        )
        return original(data_, method_, specs, s, num_samples, desc, **kw)

    monkeypatch.setattr(uci_module, "train_and_score", spy)
    s = replace(TINY, retrain=False)
    (result,) = run_uci(data, method, [2], tiny / "out", s, log=lambda m: None)
    # the grid only (the ensemble's epochs make several groups), no final stage: fitted on 40 rows,
    # validated on 10, and each grid network also scored on the 10 test rows
    assert {r[1:] for stage in seen for r in stage} == {(40, 10, 10)}
    best = max(result["validation"], key=lambda v: v["test_ll"])
    assert all(best[k] == result[k] for k in grid_points(data, method, s)[0])
    # the reported scores are the chosen grid network's on the test rows, not its validation scores
    assert {k: result[k] for k in best["test"]} == best["test"]
    assert result["test_ll"] != best["test_ll"] and result["n_train"] == 40 and result["n_test"] == 10
    assert [p.name for p in (tiny / "out").iterdir()] == [f"tiny_{method}-grid-network_split02.json"]
    assert f"| tiny | {method}-grid-network |" not in markdown_table(collect(tiny / "out"))  # a column
    assert f"{method}-grid-network" in markdown_table(collect(tiny / "out"))
    # scoring the test rows too leaves the validation scores, and so the choice, as the protocol's
    retrained = uci_module.grid_stage(data, method, [2], TINY)[2]
    assert [v["test_ll"] for v in retrained] == [v["test_ll"] for v in result["validation"]]
    with pytest.raises(ValueError, match="'sgp' has no grid search, so no grid network"):
        run_uci(data, "sgp", [2], None, s, log=lambda m: None)


@pytest.mark.parametrize("method", ["concrete", "mc-dropout", "hmc"])
def test_two_hidden_layers(tiny, method, monkeypatch):
    data = load_uci("tiny", tiny)
    models = _spy_on_build(monkeypatch, part=0)
    s = replace(TINY, hidden_layers=2, hmc_warmup=10, hmc_samples=10)
    (result,) = run_uci(data, method, [1], tiny / "out", s, log=lambda m: None)
    assert math.isfinite(result["rmse"]) and math.isfinite(result["test_ll"])
    assert result["settings"]["hidden_layers"] == 2
    assert [p.name for p in (tiny / "out").iterdir()] == [f"tiny_{method}-2-layers_split01.json"]
    if method != "hmc":  # HMC builds its network outside the vectorised protocol
        assert models and all([layer.out_features for layer in m.hidden] == [8, 8] for m in models)
    if method == "concrete":
        # one learned rate per weight layer; the prior length-scale l * sqrt(K_in) of each
        assert set(result["learned_p"]) == {"hidden.0.weight", "hidden.1.weight", "output.weight"}
        ls = result["length_scale"]
        scales = [float(layer.prior_weight_scale) for layer in [*models[-1].hidden, models[-1].output]]
        assert scales == pytest.approx([1 / (ls * math.sqrt(k)) for k in (4, 8, 8)])  # prior sd 1 / l
    # they have their own table, next to paper 001's two-layer figures
    table = markdown_table(collect(tiny / "out"))
    assert "### Networks with more hidden layers" in table
    assert f"| tiny | {method}-2-layers |" in table
    with pytest.raises(ValueError, match="hidden_layers must be a whole number >= 1, got 0"):
        replace(TINY, hidden_layers=0)


@pytest.mark.parametrize("method", ["concrete", "bbalpha-0.5", "mfvi", "ensemble", "sgp", "hmc"])
def test_every_method_runs(tiny, method):
    data = load_uci("tiny", tiny)
    (result,) = run_uci(data, method, [1], None, TINY, log=lambda m: None)
    assert math.isfinite(result["rmse"]) and math.isfinite(result["test_ll"])
    if method == "concrete":
        assert set(result["learned_p"]) == {"hidden.0.weight", "output.weight"}
        assert result["tau"] > 0 and "tau_before_m_step" in result
        # the prior length-scale is chosen on the validation rows (paper 001, appendix D)
        assert [v["length_scale"] for v in result["validation"]] == list(TINY.concrete_length_scales)
        best = max(result["validation"], key=lambda v: v["test_ll"])
        assert result["length_scale"] == best["length_scale"]


def test_ensemble_chooses_its_epochs_on_the_validation_rows(tiny, monkeypatch):
    data = load_uci("tiny", tiny)
    seen = []
    original = uci_module.train_and_score

    def spy(data_, method, specs, s, num_samples, desc, **kw):
        seen.append([(sp.split, sp.member, sp.epochs, len(sp.train)) for sp in specs])
        return original(data_, method, specs, s, num_samples, desc, **kw)

    monkeypatch.setattr(uci_module, "train_and_score", spy)
    # 10 epochs in all; the fractions give 1 (at least one epoch), 1, 10
    settings = replace(TINY, epochs_multiplier=5, ensemble_epoch_fractions=(0.01, 0.1, 1.0))
    (result,) = run_uci(data, "ensemble", [1], None, settings, log=lambda m: None)
    *grid, final = seen
    # one group per epoch count, each holding the 5 members of the split, on the first 80% of the rows
    assert sorted({run[2] for group in grid for run in group}) == [1, 10]
    assert all(sorted(r[1] for r in g) == [0, 1, 2, 3, 4] and {r[3] for r in g} == {40} for g in grid)
    assert len(grid) == 2 and len(result["validation"]) == 2  # the repeated epoch count trains once
    best = max(result["validation"], key=lambda v: v["test_ll"])
    assert result["epochs"] == best["epochs"] and {r[2] for r in final} == {best["epochs"]}
    assert {r[3] for r in final} == {50} and len(final) == 5


def test_tau_is_applied_on_the_original_scale(tiny):
    data = load_uci("tiny", tiny)
    spec = uci_methods.Spec(0, data.splits[0].train, data.splits[0].test, p=0.1, tau=2.0)
    x, y = uci_methods._tensors(data, [spec], lambda sp: sp.train, torch.device("cpu"))
    stats = Standardiser.fit(x, y)
    model, _, _ = uci_methods._build("mc-dropout", 4, 8, [spec], stats, TINY)
    assert torch.allclose(model.fixed_tau, (2.0 * stats.y_std.pow(2)).reshape(1, 1))
    assert torch.equal(stats.x_std[0, 3], torch.tensor(1.0))  # the constant column: std 0 -> 1
    # a run's own prior length-scale reaches every layer's prior (std 1/l), times sqrt(K_in) by
    # default (paper 001, appendix D): 4 inputs, 8 hidden units
    spec.length_scale = 0.5
    model, _, _ = uci_methods._build("concrete", 4, 8, [spec], stats, TINY)
    assert float(model.hidden[0].prior_weight_scale) == pytest.approx(1 / (0.5 * math.sqrt(4)))
    assert float(model.output.prior_weight_scale) == pytest.approx(1 / (0.5 * math.sqrt(8)))
    flat = replace(TINY, concrete_scale_by_fan_in=False)
    model, _, _ = uci_methods._build("concrete", 4, 8, [spec], stats, flat)
    assert float(model.hidden[0].prior_weight_scale) == float(model.output.prior_weight_scale) == 2.0
    # runs with different length-scales train together, each with its own prior
    other = replace(spec, length_scale=2.0)
    model, _, _ = uci_methods._build("concrete", 4, 8, [spec, other], stats, TINY)
    scales = model.hidden[0].prior_weight_scale.flatten()
    assert scales.tolist() == pytest.approx([1 / (0.5 * math.sqrt(4)), 1 / (2.0 * math.sqrt(4))])
    model, _, _ = uci_methods._build("mc-dropout", 4, 8, [spec, other], stats, TINY)
    assert model.output.prior_weight_scale.flatten().tolist() == pytest.approx([2.0, 0.5])


def test_concrete_grid_trains_its_length_scales_together(tiny, monkeypatch):
    data = load_uci("tiny", tiny)
    seen = []
    original = uci_module.train_and_score

    def spy(data_, method, specs, s, num_samples, desc, **kw):
        seen.append(sorted(sp.length_scale for sp in specs))
        return original(data_, method, specs, s, num_samples, desc, **kw)

    monkeypatch.setattr(uci_module, "train_and_score", spy)
    run_uci(data, "concrete", [0, 1], None, TINY, log=lambda m: None)
    grid, final = seen  # one pass for the grid of both splits, one for the final models
    assert grid == sorted(list(TINY.concrete_length_scales) * 2) and len(final) == 2


def test_streaming_scores_equal_eq13():
    g = torch.Generator().manual_seed(0)
    draws = torch.randn(50, 2, 7, generator=g, dtype=torch.float64)
    y = torch.randn(2, 7, generator=g, dtype=torch.float64)
    var = torch.tensor(0.25, dtype=torch.float64)
    calls = iter(range(0, 50, 16))

    def chunk(c):
        start = next(calls)
        return draws[start : start + c], var.expand(c, 2, 7)

    scores = score_runs(chunk, y, 50, 16)
    for r in range(2):
        eq13 = gaussian_log_likelihood(draws[:, r], y[r], 4.0).mean()
        assert torch.allclose(scores.test_ll[r], eq13)
        assert torch.allclose(scores.rmse[r], (draws[:, r].mean(0) - y[r]).pow(2).mean().sqrt())


def test_table_and_cli(tiny, capsys):
    out = tiny / "results"
    assert (
        main(
            [
                "uci",
                "--dataset",
                "tiny",
                "--method",
                "ensemble",
                "--splits",
                "0-1",
                "--data-dir",
                str(tiny),
                "--out",
                str(out),
                "--epochs-multiplier",
                "1",
                "--quiet",
            ]
        )
        == 0
    )
    rows = collect(out)
    assert {r["split"] for r in rows} == {0, 1}
    common = ["--dataset", "tiny", "--splits", "0", "--data-dir", str(tiny), "--out", str(tiny / "pd")]
    assert (
        main(["uci", *common, "--method", "mc-dropout", "--masks", "draw", "--epochs-multiplier", "1"]) == 0
    )
    stored = json.loads((tiny / "pd" / "tiny_mc-dropout-per-draw_split00.json").read_text())
    assert stored["settings"]["per_example_masks"] is False
    assert main(["uci", *common, "--method", "mfvi", "--hidden-layers", "2", "--epochs-multiplier", "1"]) == 0
    stored = json.loads((tiny / "pd" / "tiny_mfvi-2-layers_split00.json").read_text())
    assert stored["settings"]["hidden_layers"] == 2
    assert (
        main(["uci", *common, "--method", "mfvi", "--final", "grid-network", "--epochs-multiplier", "1"]) == 0
    )
    assert (tiny / "pd" / "tiny_mfvi-grid-network_split00.json").is_file()
    em = [
        "--method",
        "concrete",
        "--concrete-tau",
        "em",
        "--concrete-tau-init",
        "0.5",
        "--epochs-multiplier",
        "1",
    ]
    assert main(["uci", *common, *em]) == 0
    stored = json.loads((tiny / "pd" / "tiny_concrete_split00.json").read_text())["settings"]
    assert (stored["concrete_tau"], stored["concrete_tau_init"]) == ("em", 0.5)
    threads = torch.get_num_threads()
    try:
        assert main(["uci", *common, "--method", "sgp", "--threads", "1"]) == 0
        assert json.loads((tiny / "pd" / "tiny_sgp_split00.json").read_text())["threads"] == 1
    finally:
        torch.set_num_threads(threads)
    assert main(["uci", *common, "--method", "sgp", "--threads", "0"]) == 2
    assert "--threads must be at least 1, got 0" in capsys.readouterr().err
    assert main(["uci", *common, "--method", "mfvi", "--hidden-layers", "0"]) == 2
    assert "hidden_layers must be a whole number >= 1, got 0" in capsys.readouterr().err
    table = markdown_table(rows)
    assert "| tiny |" in table and "ensemble" in table and "2018 grid-search re-run" in table
    assert "| tiny | 2 · " in table  # the splits-and-wall-time row counts the two splits
    assert main(["uci-table", str(out), "--plot", str(tiny / "fig" / "uci.png")]) == 0
    assert "Test log-likelihood" in capsys.readouterr().out
    assert (tiny / "fig" / "uci.png").stat().st_size > 5000
    assert main(["uci", "--dataset", "nope", "--method", "mc-dropout", "--data-dir", str(tiny)]) == 2
    assert "not found" in capsys.readouterr().err
    (tiny / "empty").mkdir()
    assert main(["uci-table", str(tiny / "empty")]) == 2
    assert "no result files" in capsys.readouterr().err


def test_plot_uci_panels_and_errors():
    rows = [
        {"dataset": d, "method": m, "split": i, "rmse": 1.0 + i, "rmse_standard": 1.0, "test_ll": -1.0 - i}
        for d in ("bostonHousing", "other")
        for m in ("mc-dropout", "sgp")
        for i in range(3)
    ]
    fig = plot_uci(rows, "rmse")
    visible = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in visible] == ["bostonHousing", "other"]
    # the published band is drawn where the data set has one: 2.90 ± 0.18 for Boston
    assert [line.get_xdata()[0] for line in visible[0].lines if line.get_label().startswith("MC")] == [2.90]
    assert not [line for line in visible[1].lines if line.get_label().startswith("MC")]
    with pytest.raises(ValueError, match="metric"):
        plot_uci(rows, "nll")
    with pytest.raises(ValueError, match="no results"):
        plot_uci([])


def test_parse_splits():
    assert (
        parse_splits("0-3") == [0, 1, 2, 3]
        and parse_splits("2") == [2]
        and parse_splits("0,4-5") == [0, 4, 5]
    )


def test_download_verifies_checksums(tmp_path):
    shared = uci_directory("bostonHousing") if os.environ.get("PYRO_DROPOUT_DATA") or _has_shared() else None
    if shared is None:
        pytest.skip("no local copy of the UCI files to serve")
    source = "file://" + str(shared.parents[1])
    folder = download_uci("bostonHousing", tmp_path, source=source)
    assert (folder / "index_test_19.txt").is_file()
    (tmp_path / "uci" / "bostonHousing" / "data" / "data.txt").write_text("tampered")
    bad = tmp_path / "bad" / "bostonHousing" / "data"
    bad.mkdir(parents=True)
    (bad / "data.txt").write_text("not the data")
    with pytest.raises(ValueError, match="checksum mismatch"):
        download_uci("bostonHousing", tmp_path / "out", source="file://" + str(tmp_path / "bad"))


def _has_shared():
    try:
        uci_directory("bostonHousing")
        return True
    except FileNotFoundError:
        return False


def test_results_are_json(tiny):
    data = load_uci("tiny", tiny)
    run_uci(data, "ensemble", [0], tiny / "r", TINY, log=lambda m: None)
    payload = json.loads((tiny / "r" / "tiny_ensemble_split00.json").read_text())
    assert payload["settings"]["epochs_multiplier"] == 1


def test_prediction_chunks_fit_the_memory_budget(tiny, monkeypatch):
    # the protein grid: 60 runs x 8,232 validation rows x 100 hidden units is ~190 MB a draw
    assert draws_per_chunk(100, 60, 8232, 100, 1024) == 2
    assert draws_per_chunk(100, 1, 10, 8, 1024) == 100  # small problems keep the limit
    assert draws_per_chunk(100, 60, 8232, 100, 1) == 1  # never fewer than one draw
    seen = []
    real = uci_methods.score_runs

    def spy(draws, y, num_samples, chunk_size):
        seen.append(chunk_size)
        return real(draws, y, num_samples, chunk_size)

    monkeypatch.setattr(uci_methods, "score_runs", spy)
    data = load_uci("tiny", tiny)
    spec = uci_methods.Spec(0, data.splits[0].train, data.splits[0].test, p=0.1, tau=2.0)
    budget = 2 * 10 * 8 * 4 * 3 / 2**20  # room for three draws of 10 rows x 8 units
    uci_methods.train_and_score(data, "mc-dropout", [spec], replace(TINY, chunk_memory_mb=budget), 7, "")
    assert seen == [3]


def test_verdict_against_the_published_figures():
    from pyro_dropout.experiments.uci_table import _verdict

    naval = (0.00, 0.00, 4.45, 0.00)  # published, rounded to two decimals

    def ours(rmse, rmse_se, ll, ll_se):
        return {"rmse": (rmse, rmse_se), "test_ll": (ll, ll_se)}

    # 0.0017 rounds to the published 0.00; 0.006 does not, even within its standard error
    assert _verdict(ours(0.0017, 0.0002, 4.45, 0.01), naval) == "RMSE ✓, LL ✓"
    assert _verdict(ours(0.0060, 0.0005, 4.40, 0.01), naval) == "RMSE ✗, LL ✗"
    # within one standard error, or better, counts as a match
    boston = (2.90, 0.18, -2.40, 0.04)
    assert _verdict(ours(3.00, 0.11, -2.43, 0.03), boston) == "RMSE ✓, LL ✓"
    assert _verdict(ours(3.00, 0.09, -2.30, float("nan")), boston) == "RMSE ✗, LL ✓"


def test_init_setting_reaches_every_network_and_is_checked_on_resume(tiny, monkeypatch):
    data = load_uci("tiny", tiny)
    guides = _spy_on_build(monkeypatch, part=1)
    from pyro_dropout.guides import init_to_glorot

    for method in ("mc-dropout", "mfvi", "ensemble", "concrete"):
        guides.clear()
        run_uci(data, method, [0], None, replace(TINY, init="glorot"), log=lambda m: None)
        # (Concrete dropout holds tau at its own value, so its network has no tau site to start)
        assert guides and all(g.init_loc_fn is init_to_glorot for g in guides), method
    # learning tau by MAP, Concrete dropout starts it at its own value and the rest by the init setting
    guides.clear()
    run_uci(data, "concrete", [0], None, replace(TINY, init="glorot", concrete_tau="map"), log=lambda m: None)
    assert guides and all(g.init_loc_fn.keywords["fallback"] is init_to_glorot for g in guides)
    run_uci(data, "mc-dropout", [0], tiny / "out", TINY, log=lambda m: None)
    with pytest.raises(ValueError, match="init='fan-in' but this run has init='glorot'"):
        run_uci(data, "mc-dropout", [0], tiny / "out", replace(TINY, init="glorot"), log=lambda m: None)
    with pytest.raises(ValueError, match="unknown init 'he'; choose from fan-in, glorot"):
        run_uci(data, "mc-dropout", [1], None, replace(TINY, init="he"), log=lambda m: None)


def test_concrete_tau_start_under_map_and_the_settings_checked_on_resume(tiny):
    data = load_uci("tiny", tiny)
    sp = uci_methods.Spec(0, data.splits[0].train, data.splits[0].test)
    x = torch.randn(4, 10, data.x.shape[1])
    y = torch.randn(4, 10)
    stats = Standardiser.fit(x, y)
    learned = replace(TINY, concrete_tau="map")

    def initial_tau(settings):
        pyro.clear_param_store()
        _, guide, _ = uci_methods._build("concrete", data.x.shape[1], 5, [sp] * 4, stats, settings)
        guide(x, y)
        return guide.median()["tau"].reshape(-1)

    # the default holds tau at 1 (chosen on validation rows); "map" learns it, starting there
    assert (TINY.concrete_tau, TINY.concrete_tau_init) == ("em", 1.0)
    # (through the guide's log-parametrisation: equal to float32 rounding)
    assert torch.allclose(initial_tau(learned), torch.full((4,), 1.0), rtol=1e-6, atol=0)
    assert torch.allclose(
        initial_tau(replace(learned, concrete_tau_init=1e-3)), torch.full((4,), 1e-3), rtol=1e-6
    )
    legacy = initial_tau(replace(learned, concrete_tau_init=None))  # a sample median of the prior, per run
    assert len(set(legacy.tolist())) == 4
    with pytest.raises(ValueError, match=r"concrete_tau_init must be a positive finite precision, got -1\.0"):
        initial_tau(replace(learned, concrete_tau_init=-1.0))
    # files made before the settings learned tau by MAP from a random start: resuming one under
    # the new default is an error, and so is one made with another start
    out = tiny / "out"
    for method in ("concrete", "mc-dropout"):
        run_uci(data, method, [0], out, TINY, log=lambda m: None)
        path = out / f"tiny_{method}_split00.json"
        stored = json.loads(path.read_text())
        del stored["settings"]["concrete_tau_init"], stored["settings"]["concrete_tau"]
        path.write_text(json.dumps(stored))
    with pytest.raises(ValueError, match=r"concrete_tau_init=None but this run has concrete_tau_init=1\.0"):
        run_uci(data, "concrete", [0], out, TINY, log=lambda m: None)
    with pytest.raises(ValueError, match=r"concrete_tau='map' but this run has concrete_tau='em'"):
        run_uci(data, "concrete", [0], out, replace(TINY, concrete_tau_init=None), log=lambda m: None)
    run_uci(data, "concrete", [0], out, replace(learned, concrete_tau_init=None), log=lambda m: None)
    run_uci(data, "mc-dropout", [0], out, TINY, log=lambda m: None)  # the settings are Concrete's only
    legacy_settings = uci_methods.Settings.from_stored({"seed": 3})
    assert (legacy_settings.concrete_tau, legacy_settings.concrete_tau_init) == ("map", None)


def test_concrete_tau_held_during_training_then_set_by_the_m_step(tiny):
    data = load_uci("tiny", tiny)
    runs = {}
    for init in (0.5, 2.0):
        s = replace(TINY, concrete_tau="em", concrete_tau_init=init)
        (runs[init],) = run_uci(data, "concrete", [0], None, s, log=lambda m: None)
    # held: the value before the M-step is the start itself (original scale: the same factor 1/std_y^2)
    assert runs[2.0]["tau_before_m_step"] / runs[0.5]["tau_before_m_step"] == pytest.approx(4.0, rel=1e-6)
    # the M-step replaced it with the closed-form MAP, which depends on the fit, not on the start
    assert runs[2.0]["tau"] != pytest.approx(runs[2.0]["tau_before_m_step"], rel=1e-3)
    (learned,) = run_uci(
        data,
        "concrete",
        [0],
        None,
        replace(TINY, concrete_tau="map", concrete_tau_init=0.5),
        log=lambda m: None,
    )
    assert learned["tau_before_m_step"] != pytest.approx(
        runs[0.5]["tau_before_m_step"], rel=1e-6
    )  # MAP moved it
    with pytest.raises(ValueError, match="unknown concrete_tau 'fixed'"):
        run_uci(data, "concrete", [0], None, replace(TINY, concrete_tau="fixed"), log=lambda m: None)
    with pytest.raises(ValueError, match="holds tau at concrete_tau_init, which is None"):
        run_uci(
            data,
            "concrete",
            [0],
            None,
            replace(TINY, concrete_tau="em", concrete_tau_init=None),
            log=lambda m: None,
        )


def _stop_training_when(monkeypatch, stop):
    """Record each ``train_and_score`` call of the protocol as ``(desc, splits, runs)`` and raise
    KeyboardInterrupt (a stopped run) at the first call for which ``stop(calls)`` holds."""
    original = uci_module.train_and_score
    calls = []

    def train(data_, method, specs, s, num_samples, desc, **kw):
        calls.append((desc, sorted({sp.split for sp in specs}), len(specs)))
        if stop(calls):
            raise KeyboardInterrupt
        return original(data_, method, specs, s, num_samples, desc, **kw)

    monkeypatch.setattr(uci_module, "train_and_score", train)
    return calls


def test_a_run_stopped_in_the_final_stage_resumes_there(tiny, monkeypatch):
    data = load_uci("tiny", tiny)
    whole = run_uci(data, "mc-dropout", [0, 1], tiny / "whole", TINY, log=lambda m: None)
    original = uci_module.train_and_score
    _stop_training_when(monkeypatch, lambda calls: "final" in calls[-1][0])
    out = tiny / "stopped"
    with pytest.raises(KeyboardInterrupt):
        run_uci(data, "mc-dropout", [0, 1], out, TINY, log=lambda m: None)
    grids = sorted(p.name for p in out.iterdir())
    assert grids == ["tiny_mc-dropout_split00.grid.json", "tiny_mc-dropout_split01.grid.json"]
    with pytest.raises(FileNotFoundError, match="no result files"):
        collect(out)  # a grid search alone is not a result
    # a stored grid search made with other settings is not used
    with pytest.raises(ValueError, match=r"split00\.grid\.json was made with seed=0 but this run has seed=1"):
        run_uci(data, "mc-dropout", [0], out, replace(TINY, seed=1), log=lambda m: None)
    grid_seconds = {json.loads((out / g).read_text())["grid_seconds"] for g in grids}
    assert len(grid_seconds) == 1  # the two splits' grids trained together
    stages = []
    monkeypatch.setattr(
        uci_module, "train_and_score", lambda *a, **k: (stages.append(a[-1]), original(*a, **k))[1]
    )
    messages = []
    resumed = run_uci(data, "mc-dropout", [0, 1], out, TINY, log=messages.append)
    assert all("final" in d for d in stages)  # no grid training
    # the grid search's wall time, spent in the stopped process, is part of the protocol's
    (earlier,) = grid_seconds
    for r in resumed:
        assert r["resumed_grid_seconds"] == earlier > 0
        assert r["protocol_seconds"] > earlier and r["seconds"] == r["protocol_seconds"] / 2
    assert any("keeping the finished grid search of splits [0, 1]" in m for m in messages)
    for a, b in zip(whole, resumed, strict=True):  # the final stage is seeded on its own
        assert a["validation"] == b["validation"] and (a["p"], a["tau"]) == (b["p"], b["tau"])
        assert a["test_ll"] == b["test_ll"] and a["rmse"] == b["rmse"]
    assert sorted(p.name for p in out.iterdir()) == [
        "tiny_mc-dropout_split00.json",
        "tiny_mc-dropout_split01.json",
    ]


@pytest.mark.parametrize(("method", "stage"), [("mc-dropout", "grid"), ("concrete", "final")])
def test_a_run_stopped_while_training_resumes_from_its_checkpoint(
    tiny, monkeypatch, capsys, method, stage, device
):
    data = load_uci("tiny", tiny)
    s = replace(TINY, epochs_multiplier=5, device=device)  # 10 epochs
    whole = run_uci(data, method, [0, 1], tiny / "whole", s, log=lambda m: None)
    original = uci_methods.train_runs

    def stop_at_epoch_4(*args, **kwargs):
        desc, checkpoint = args[6], args[-1]
        checkpoint.every = 0.0  # keep the state after every epoch

        def on_epoch(e):
            if stage in desc and e == 4:
                raise KeyboardInterrupt

        return original(*args[:-2], on_epoch, checkpoint)

    monkeypatch.setattr(uci_methods, "train_runs", stop_at_epoch_4)
    out = tiny / "stopped"
    with pytest.raises(KeyboardInterrupt):
        run_uci(data, method, [0, 1], out, s, log=lambda m: None)
    (kept,) = out.glob("*.train.pt")
    assert len(torch.load(kept, weights_only=False)["history"]) == 4
    runs = 8 if stage == "grid" else 2  # mc-dropout's 2 x 4 grid points; Concrete's 2 final models
    lines = uci_module.status(out)
    assert lines[0].startswith(f"tiny {method} {stage} ({runs} runs): epoch 4/10, ")
    assert lines[1:] == (
        []
        if stage == "grid"
        else [f"tiny {method}: grid search done, final models to train for splits [0, 1]"]
    )
    assert main(["uci-status", str(out)]) == 0
    assert "epoch 4/10" in capsys.readouterr().out
    monkeypatch.undo()
    epochs = []

    def record(*args):
        desc = args[6]
        return original(*args[:-2], lambda e: epochs.append((desc.split()[2], e)), args[-1])

    monkeypatch.setattr(uci_methods, "train_runs", record)
    resumed = run_uci(data, method, [0, 1], out, s, log=lambda m: None)
    # the stopped stage ran its last 6 epochs only (and the grid did not run again)
    assert epochs == [(stage, e) for e in range(5, 11)] + (
        [("final", e) for e in range(1, 11)] if stage == "grid" else []
    )
    # and ends exactly where the unstopped run does
    for a, b in zip(whole, resumed, strict=True):
        assert a["validation"] == b["validation"] and a["test_ll"] == b["test_ll"] and a["rmse"] == b["rmse"]
        assert a.get("learned_p") == b.get("learned_p") and a.get("tau") == b.get("tau")
        assert b["resumed_training_seconds"] > 0 and a["resumed_training_seconds"] == 0
    assert not list(out.glob("*.train.pt"))  # removed once scored
    assert uci_module.status(out) == []
    assert main(["uci-status", str(out)]) == 0
    assert "no training in progress" in capsys.readouterr().out
    assert main(["uci-status", str(tiny / "nowhere")]) == 2
    assert "no results folder" in capsys.readouterr().err
    # a checkpoint of other runs is not used as if it were these
    other = tiny / "other"
    other.mkdir()
    torch.save({"key": "else", "history": []}, other / kept.name)
    with pytest.raises(ValueError, match="holds the training of other runs or settings"):
        run_uci(data, method, [0, 1], other, s, log=lambda m: None)


def test_training_groups_fit_the_step_memory_budget(tiny):
    data = load_uci("tiny", tiny)  # 8 hidden units, batch 128, float32: 4 kB a run and particle
    split = 10 * 128 * 8 * 4 / 2**20  # BB-alpha's K = 10 particles, in MB, for one run
    s = replace(TINY, step_memory_mb=4 * split)  # room for the 4 grid runs of one split
    assert uci_module.split_chunks(data, "bbalpha-0.5", [0, 1, 2], s, 4) == [[0], [1], [2]]
    assert uci_module.split_chunks(data, "bbalpha-0.5", [0, 1, 2], s, 2) == [[0, 1], [2]]
    assert uci_module.split_chunks(data, "bbalpha-0.5", [0, 1, 2], s, 8) == [[0], [1], [2]]  # >= 1
    assert uci_module.split_chunks(data, "mc-dropout", [0, 1, 2], s, 4) == [[0, 1, 2]]  # K = 1
    assert uci_module.split_chunks(data, "mc-dropout", [], s, 4) == []
    unlimited = replace(s, step_memory_mb=None)
    assert uci_module.split_chunks(data, "bbalpha-0.5", [0, 1, 2], unlimited, 4) == [[0, 1, 2]]
    on_gpu = replace(s, device="cuda")  # launch-bound there: all together
    assert uci_module.split_chunks(data, "bbalpha-0.5", [0, 1, 2], on_gpu, 4) == [[0, 1, 2]]
    for bad in (0, -1.0, float("nan"), "12"):
        with pytest.raises(ValueError, match="step_memory_mb must be a positive number of MB or None"):
            replace(TINY, step_memory_mb=bad)


def test_grid_groups_train_apart_and_each_is_kept_as_it_ends(tiny, monkeypatch):
    data = load_uci("tiny", tiny)
    s = replace(TINY, step_memory_mb=4 * 10 * 128 * 8 * 4 / 2**20)  # BB-alpha: one split a group
    original = uci_module.train_and_score
    seen = _stop_training_when(monkeypatch, lambda calls: len(calls) == 2)
    out = tiny / "out"
    with pytest.raises(KeyboardInterrupt):
        run_uci(data, "bbalpha-1", [0, 1], out, s, log=lambda m: None)
    assert [r[1:] for r in seen] == [([0], 4), ([1], 4)]  # each split's 4 grid runs, one group each
    # the first group's grid search was kept as soon as it ended
    assert sorted(p.name for p in out.iterdir()) == ["tiny_bbalpha-1_split00.grid.json"]
    first = json.loads((out / "tiny_bbalpha-1_split00.grid.json").read_text())["grid_seconds"]
    seen.clear()
    monkeypatch.setattr(
        uci_module, "train_and_score", lambda *a, **k: (seen.append(a[-1]), original(*a, **k))[1]
    )
    results = run_uci(data, "bbalpha-1", [0, 1], out, s, log=lambda m: None)
    # split 1's grid, then the final models of both splits: 1 run a split, so one group
    assert len(seen) == 2 and "grid" in seen[0] and "final" in seen[1]
    assert results[0]["resumed_grid_seconds"] == first and "resumed_grid_seconds" not in results[1]
    assert results[0]["protocol_seconds"] > first
    # MC dropout's grid fits the same budget whole: one group, as before
    seen.clear()
    run_uci(data, "mc-dropout", [0, 1], tiny / "mc", s, log=lambda m: None)
    assert len(seen) == 2


def test_a_cell_over_fewer_splits_says_how_many():
    def row(method, split, ll):
        return {
            "dataset": "kin8nm",
            "method": method,
            "split": split,
            "rmse": 0.08,
            "rmse_standard": 0.08,
            "test_ll": ll,
            "per_example_masks": True,
            "settings": {"per_example_masks": True},
        }

    rows = [row("mc-dropout", i, 1.1 + 0.01 * i) for i in range(4)] + [
        row("bbalpha-1", i, 1.2) for i in (0, 1)
    ]
    table = markdown_table(rows)
    ll_row = next(
        line for line in table[table.index("log-likelihood") :].splitlines() if line.startswith("| kin8nm |")
    )
    cells = ll_row.split(" | ")
    assert "(2/4)" in ll_row and "1.200 ± 0.000 (2/4)" in cells  # the partial column, marked
    assert "1.115 ± 0.006" in cells  # the full column, unmarked


def test_cells_give_each_mean_to_the_precision_of_its_error():
    """A data set's decimals show its smallest standard error to one significant figure (2 to 5):
    naval-sized RMSEs must not all print as 0.001 ± 0.000 / 0.000 ± 0.000."""

    def row(dataset, method, split, rmse, ll):
        return {
            "dataset": dataset,
            "method": method,
            "split": split,
            "rmse": rmse,
            "rmse_standard": rmse,
            "test_ll": ll,
            "per_example_masks": True,
            "settings": {"per_example_masks": True},
        }

    rows = []
    for i in range(4):
        rows += [
            row("naval-propulsion-plant", "mc-dropout", i, 0.0008 + 0.0001 * (i % 2), 4.44 + 0.002 * i),
            row("naval-propulsion-plant", "ensemble", i, 0.0004, 7.4),  # equal values: se 0
            row("bostonHousing", "mc-dropout", i, 2.5 + 0.4 * i, -2.4 - 0.1 * i),
        ]
    table = markdown_table(rows)

    def cells(section, dataset):
        text = table[table.index(section) :]
        return next(line for line in text.splitlines() if line.startswith(f"| {dataset} |")).split(" | ")

    naval_rmse = cells("Test RMSE", "naval-propulsion-plant")
    # se of the mc-dropout RMSE is 0.0000289: five decimals; the ensemble's 0.0004 stays visible
    ensemble = cells("Test RMSE", "data set").index("ensemble")
    assert naval_rmse[1] == "0.00085 ± 0.00003" and naval_rmse[ensemble] == "0.00040 ± 0.00000"
    naval_ll = cells("log-likelihood", "naval-propulsion-plant")
    assert naval_ll[1] == "4.443 ± 0.001"  # se 0.00129: three decimals
    assert cells("Test RMSE", "bostonHousing")[1] == "3.10 ± 0.26"  # se 0.258: the two-decimal floor
    assert cells("log-likelihood", "bostonHousing")[1] == "-2.55 ± 0.06"
    # the published columns stay at their own two decimals
    assert cells("Test RMSE", "bostonHousing")[-1] == "2.90 ± 0.18 |"
    # the standard-dropout table uses the RMSE row's decimals
    assert "| naval-propulsion-plant | 0.00085 ± 0.00003 | 0.00085 ± 0.00003 | 4 |" in table
