"""The UCI protocol on a tiny synthetic data set in the standard layout: its stages and groups."""

import json
import math
from dataclasses import replace

import pytest

from pyro_dropout_experiments.uci import (
    Spec,
    UCIBenchmark,
    UCIProtocol,
    collect,
    draws_per_chunk,
    get_method,
    grid_setup,
    markdown_table,
    run_uci,
    split_chunks,
    train_and_score,
)
from pyro_dropout_experiments.uci import protocol as protocol_module
from pyro_dropout_experiments.uci import runs as runs_module
from pyro_dropout_experiments.uci.methods import ConcreteOptions
from tests.uci_data import TINY, spy_on_build, stop_training_when, tiny_method


def test_mc_dropout_protocol_grid_retrain_and_resume(tiny, monkeypatch):
    data = UCIBenchmark.load("tiny", tiny)
    seen = []
    original = protocol_module.train_and_score

    def spy(data_, method, specs, s, num_samples, desc, **kw):
        seen.append(
            (
                desc,
                [
                    (sp.split, len(sp.train), len(sp.score), sp.hyper.get("p"), sp.hyper.get("tau"))
                    for sp in specs
                ],
                num_samples,
            )
        )
        return original(data_, method, specs, s, num_samples, desc, **kw)

    monkeypatch.setattr(protocol_module, "train_and_score", spy)
    out = tiny / "results"
    results = run_uci(data, tiny_method("mc-dropout"), [0, 2], out, TINY, log=lambda m: None)
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
    run_uci(data, tiny_method("mc-dropout"), [0, 1, 2], out, TINY, log=lambda m: None)
    assert [r[0] for r in seen[1][1]] == [1]
    # a kept split must come from the same command-line settings: another seed is an error
    with pytest.raises(ValueError, match=r"split00\.json was made with seed=0 but this run has seed=1"):
        run_uci(data, tiny_method("mc-dropout"), [0], out, replace(TINY, seed=1), log=lambda m: None)


@pytest.mark.parametrize("method", ["mc-dropout", "bbalpha-1", "concrete"])
def test_masks_per_example_by_default_and_per_draw_on_request(tiny, method, monkeypatch):
    data = UCIBenchmark.load("tiny", tiny)
    losses = spy_on_build(monkeypatch, "loss")
    assert TINY.per_example_masks  # the protocol's default, as in the published code
    (result,) = run_uci(data, tiny_method(method), [0], tiny / "out", TINY, log=lambda m: None)
    assert losses and all(loss.per_example_masks for loss in losses)
    assert result["settings"]["per_example_masks"] is True and math.isfinite(result["test_ll"])
    losses.clear()
    run_uci(
        data,
        tiny_method(method),
        [0],
        tiny / "out",
        replace(TINY, per_example_masks=False),
        log=lambda m: None,
    )
    assert losses and not any(loss.per_example_masks for loss in losses)
    # the two estimators keep separate files in one folder, and the table labels them apart
    names = sorted(p.name for p in (tiny / "out").iterdir())
    assert names == [f"tiny_{method}-per-draw_split00.json", f"tiny_{method}_split00.json"]
    table = markdown_table(collect(tiny / "out"))
    assert f"| data set | {method} | {method}-per-draw |" in table


@pytest.mark.parametrize("method", ["mc-dropout", "ensemble"])
def test_grid_network_scored_as_the_published_code_does(tiny, method, monkeypatch):
    data = UCIBenchmark.load("tiny", tiny)
    seen = []
    original = protocol_module.train_and_score

    def spy(data_, method_, specs, s, num_samples, desc, **kw):
        seen.append(
            [
                (sp.split, len(sp.train), len(sp.score), None if sp.test is None else len(sp.test))
                for sp in specs
            ]
        )
        return original(data_, method_, specs, s, num_samples, desc, **kw)

    monkeypatch.setattr(protocol_module, "train_and_score", spy)
    s = replace(TINY, retrain=False)
    (result,) = run_uci(data, tiny_method(method), [2], tiny / "out", s, log=lambda m: None)
    # the grid only (the ensemble's epochs make several groups), no final stage: fitted on 40 rows,
    # validated on 10, and each grid network also scored on the 10 test rows
    assert {r[1:] for stage in seen for r in stage} == {(40, 10, 10)}
    best = max(result["validation"], key=lambda v: v["test_ll"])
    assert all(best[k] == result[k] for k in tiny_method(method).grid(grid_setup(data, s))[0])
    # the reported scores are the chosen grid network's on the test rows, not its validation scores
    assert {k: result[k] for k in best["test"]} == best["test"]
    assert result["test_ll"] != best["test_ll"] and result["n_train"] == 40 and result["n_test"] == 10
    assert [p.name for p in (tiny / "out").iterdir()] == [f"tiny_{method}-grid-network_split02.json"]
    assert f"| tiny | {method}-grid-network |" not in markdown_table(collect(tiny / "out"))  # a column
    assert f"{method}-grid-network" in markdown_table(collect(tiny / "out"))
    # scoring the test rows too leaves the validation scores, and so the choice, as the protocol's
    retrained = UCIProtocol(data, tiny_method(method), TINY).grid_stage([2])[2]
    assert [v["test_ll"] for v in retrained] == [v["test_ll"] for v in result["validation"]]
    with pytest.raises(ValueError, match="'sgp' has no grid search, so no grid network"):
        run_uci(data, tiny_method("sgp"), [2], None, s, log=lambda m: None)


@pytest.mark.parametrize("method", ["concrete", "mc-dropout", "hmc"])
def test_two_hidden_layers(tiny, method, monkeypatch):
    data = UCIBenchmark.load("tiny", tiny)
    models = spy_on_build(monkeypatch, "model")
    s = replace(TINY, hidden_layers=2)
    (result,) = run_uci(data, tiny_method(method), [1], tiny / "out", s, log=lambda m: None)
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
    with pytest.raises(ValueError, match=r"hidden_layers \(--hidden-layers\) must be at least 1, got 0"):
        replace(TINY, hidden_layers=0)


@pytest.mark.parametrize("method", ["concrete", "bbalpha-0.5", "mfvi", "ensemble", "sgp", "hmc", "nn-p0"])
def test_every_method_runs(tiny, method):
    data = UCIBenchmark.load("tiny", tiny)
    (result,) = run_uci(data, tiny_method(method), [1], None, TINY, log=lambda m: None)
    assert math.isfinite(result["rmse"]) and math.isfinite(result["test_ll"])
    if method == "concrete":
        assert set(result["learned_p"]) == {"hidden.0.weight", "output.weight"}
        assert result["tau"] > 0 and "tau_before_m_step" in result
        # the prior length-scale (paper 001, appendix D) and the held tau are chosen on the validation rows
        o = ConcreteOptions()
        grid = [(v["length_scale"], v["tau_train"]) for v in result["validation"]]
        assert grid == [(length, t) for length in o.length_scales for t in o.tau_grid]
        best = max(result["validation"], key=lambda v: v["test_ll"])
        assert (result["length_scale"], result["tau_train"]) == (best["length_scale"], best["tau_train"])


def test_ensemble_chooses_its_epochs_on_the_validation_rows(tiny, monkeypatch):
    data = UCIBenchmark.load("tiny", tiny)
    seen = []
    original = protocol_module.train_and_score

    def spy(data_, method, specs, s, num_samples, desc, **kw):
        seen.append([(sp.split, sp.member, sp.epochs, len(sp.train)) for sp in specs])
        return original(data_, method, specs, s, num_samples, desc, **kw)

    monkeypatch.setattr(protocol_module, "train_and_score", spy)
    # 10 epochs in all; the fractions give 1 (at least one epoch), 1, 10
    settings = replace(TINY, epochs_multiplier=5)
    ensemble = tiny_method("ensemble", epoch_fractions=(0.01, 0.1, 1.0))
    (result,) = run_uci(data, ensemble, [1], None, settings, log=lambda m: None)
    *grid, final = seen
    # one group per epoch count, each holding the 5 members of the split, on the first 80% of the rows
    assert sorted({run[2] for group in grid for run in group}) == [1, 10]
    assert all(sorted(r[1] for r in g) == [0, 1, 2, 3, 4] and {r[3] for r in g} == {40} for g in grid)
    assert len(grid) == 2 and len(result["validation"]) == 2  # the repeated epoch count trains once
    best = max(result["validation"], key=lambda v: v["test_ll"])
    assert result["epochs"] == best["epochs"] and {r[2] for r in final} == {best["epochs"]}
    assert {r[3] for r in final} == {50} and len(final) == 5


def test_concrete_grid_trains_its_length_scales_together(tiny, monkeypatch):
    data = UCIBenchmark.load("tiny", tiny)
    seen = []
    original = protocol_module.train_and_score

    def spy(data_, method, specs, s, num_samples, desc, **kw):
        seen.append(sorted(sp.hyper["length_scale"] for sp in specs))
        return original(data_, method, specs, s, num_samples, desc, **kw)

    monkeypatch.setattr(protocol_module, "train_and_score", spy)
    run_uci(data, tiny_method("concrete"), [0, 1], None, TINY, log=lambda m: None)
    grid, final = seen  # one pass for the grid of both splits, one for the final models
    o = ConcreteOptions()
    assert grid == sorted(list(o.length_scales) * len(o.tau_grid) * 2) and len(final) == 2


def test_results_are_json(tiny):
    data = UCIBenchmark.load("tiny", tiny)
    run_uci(data, tiny_method("ensemble"), [0], tiny / "r", TINY, log=lambda m: None)
    payload = json.loads((tiny / "r" / "tiny_ensemble_split00.json").read_text())
    assert payload["settings"]["epochs_multiplier"] == 1


def test_prediction_chunks_fit_the_memory_budget(tiny, monkeypatch):
    # the protein grid: 60 runs x 8,232 validation rows x 100 hidden units is ~190 MB a draw
    assert draws_per_chunk(100, 60, 8232, 100, 1024) == 2
    assert draws_per_chunk(100, 1, 10, 8, 1024) == 100  # small problems keep the limit
    assert draws_per_chunk(100, 60, 8232, 100, 1) == 1  # never fewer than one draw
    seen = []
    real = runs_module.score_gaussian_draws

    def spy(draws, y, num_samples, chunk_size, levels):
        seen.append(chunk_size)
        return real(draws, y, num_samples, chunk_size, levels)

    monkeypatch.setattr(runs_module, "score_gaussian_draws", spy)
    data = UCIBenchmark.load("tiny", tiny)
    spec = Spec(0, data.splits[0].train, data.splits[0].test, {"p": 0.1, "tau": 2.0})
    budget = 2 * 10 * 8 * 4 * 3 / 2**20  # room for three draws of 10 rows x 8 units
    train_and_score(data, get_method("mc-dropout"), [spec], replace(TINY, chunk_memory_mb=budget), 7, "")
    assert seen == [3]


def test_training_groups_fit_the_step_memory_budget(tiny):
    data = UCIBenchmark.load("tiny", tiny)  # 8 hidden units, batch 128, float32: 4 kB a run and particle
    split = 10 * 128 * 8 * 4 / 2**20  # BB-alpha's K = 10 particles, in MB, for one run
    s = replace(TINY, step_memory_mb=4 * split)  # room for the 4 grid runs of one split
    assert split_chunks(data, get_method("bbalpha-0.5"), [0, 1, 2], s, 4) == [[0], [1], [2]]
    assert split_chunks(data, get_method("bbalpha-0.5"), [0, 1, 2], s, 2) == [[0, 1], [2]]
    assert split_chunks(data, get_method("bbalpha-0.5"), [0, 1, 2], s, 8) == [[0], [1], [2]]  # >= 1
    assert split_chunks(data, get_method("mc-dropout"), [0, 1, 2], s, 4) == [[0, 1, 2]]  # K = 1
    assert split_chunks(data, get_method("mc-dropout"), [], s, 4) == []
    unlimited = replace(s, step_memory_mb=None)
    assert split_chunks(data, get_method("bbalpha-0.5"), [0, 1, 2], unlimited, 4) == [[0, 1, 2]]
    on_gpu = replace(s, device="cuda")  # launch-bound there: all together
    assert split_chunks(data, get_method("bbalpha-0.5"), [0, 1, 2], on_gpu, 4) == [[0, 1, 2]]
    for bad, why in (
        (0, "must be positive"),
        (-1.0, "must be positive"),
        (float("nan"), "must be finite"),
        ("12", "must be a number"),
    ):
        with pytest.raises(ValueError, match=rf"step_memory_mb \(--step-memory-mb\) {why}"):
            replace(TINY, step_memory_mb=bad)


def test_grid_groups_train_apart_and_each_is_kept_as_it_ends(tiny, monkeypatch):
    data = UCIBenchmark.load("tiny", tiny)
    s = replace(TINY, step_memory_mb=4 * 10 * 128 * 8 * 4 / 2**20)  # BB-alpha: one split a group
    original = protocol_module.train_and_score
    seen = stop_training_when(monkeypatch, lambda calls: len(calls) == 2)
    out = tiny / "out"
    with pytest.raises(KeyboardInterrupt):
        run_uci(data, tiny_method("bbalpha-1"), [0, 1], out, s, log=lambda m: None)
    assert [r[1:] for r in seen] == [([0], 4), ([1], 4)]  # each split's 4 grid runs, one group each
    # the first group's grid search was kept as soon as it ended
    assert sorted(p.name for p in out.iterdir()) == ["tiny_bbalpha-1_split00.grid.json"]
    first = json.loads((out / "tiny_bbalpha-1_split00.grid.json").read_text())["grid_seconds"]
    seen.clear()
    monkeypatch.setattr(
        protocol_module, "train_and_score", lambda *a, **k: (seen.append(a[-1]), original(*a, **k))[1]
    )
    results = run_uci(data, tiny_method("bbalpha-1"), [0, 1], out, s, log=lambda m: None)
    # split 1's grid, then the final models of both splits: 1 run a split, so one group
    assert len(seen) == 2 and "grid" in seen[0] and "final" in seen[1]
    assert results[0]["resumed_grid_seconds"] == first and "resumed_grid_seconds" not in results[1]
    assert results[0]["protocol_seconds"] > first
    # MC dropout's grid fits the same budget whole: one group, as before
    seen.clear()
    run_uci(data, tiny_method("mc-dropout"), [0, 1], tiny / "mc", s, log=lambda m: None)
    assert len(seen) == 2
