"""Stopped UCI runs resume where they stood: in the final stage, or mid-training from a checkpoint."""

import json
from dataclasses import replace

import pytest
import torch

from pyro_dropout_experiments.cli import main
from pyro_dropout_experiments.core import read_checkpoint
from pyro_dropout_experiments.uci import (
    UCIBenchmark,
    collect,
    run_uci,
    status,
)
from pyro_dropout_experiments.uci import protocol as protocol_module
from pyro_dropout_experiments.uci import runs as runs_module
from tests.uci_data import TINY, stop_training_when, tiny_method


def test_a_run_stopped_in_the_final_stage_resumes_there(tiny, monkeypatch):
    data = UCIBenchmark.load("tiny", tiny)
    whole = run_uci(data, tiny_method("mc-dropout"), [0, 1], tiny / "whole", TINY, log=lambda m: None)
    original = protocol_module.train_and_score
    stop_training_when(monkeypatch, lambda calls: "final" in calls[-1][0])
    out = tiny / "stopped"
    with pytest.raises(KeyboardInterrupt):
        run_uci(data, tiny_method("mc-dropout"), [0, 1], out, TINY, log=lambda m: None)
    grids = sorted(p.name for p in out.iterdir())
    assert grids == ["tiny_mc-dropout_split00.grid.json", "tiny_mc-dropout_split01.grid.json"]
    with pytest.raises(FileNotFoundError, match="no result files"):
        collect(out)  # a grid search alone is not a result
    # a stored grid search made with other settings is not used
    with pytest.raises(ValueError, match=r"split00\.grid\.json was made with seed=0 but this run has seed=1"):
        run_uci(data, tiny_method("mc-dropout"), [0], out, replace(TINY, seed=1), log=lambda m: None)
    grid_seconds = {json.loads((out / g).read_text())["grid_seconds"] for g in grids}
    assert len(grid_seconds) == 1  # the two splits' grids trained together
    stages = []
    monkeypatch.setattr(
        protocol_module, "train_and_score", lambda *a, **k: (stages.append(a[-1]), original(*a, **k))[1]
    )
    messages = []
    resumed = run_uci(data, tiny_method("mc-dropout"), [0, 1], out, TINY, log=messages.append)
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


@pytest.mark.parametrize(
    "tamper",
    [
        lambda rows: [],
        lambda rows: [{**rows[0], "tau": -1.0}, *rows[1:]],
        lambda rows: [{**rows[0], "p": 1.5}, *rows[1:]],
        lambda rows: "rows",
    ],
    ids=["empty", "tau=-1", "p=1.5", "not-a-list"],
)
def test_a_kept_grid_search_that_is_not_this_grid_is_an_error_naming_the_file(tiny, monkeypatch, tamper):
    data = UCIBenchmark.load("tiny", tiny)
    stop_training_when(monkeypatch, lambda calls: "final" in calls[-1][0])
    out = tiny / "stopped"
    with pytest.raises(KeyboardInterrupt):
        run_uci(data, tiny_method("mc-dropout"), [0], out, TINY, log=lambda m: None)
    monkeypatch.undo()
    path = out / "tiny_mc-dropout_split00.grid.json"
    record = json.loads(path.read_text())
    path.write_text(json.dumps({**record, "validation": tamper(record["validation"])}))
    with pytest.raises(ValueError, match=r"split00\.grid\.json: .*remove the file to run"):
        run_uci(data, tiny_method("mc-dropout"), [0], out, TINY, log=lambda m: None)


@pytest.mark.parametrize(("method", "stage"), [("mc-dropout", "grid"), ("concrete", "final")])
def test_a_run_stopped_while_training_resumes_from_its_checkpoint(
    tiny, monkeypatch, capsys, method, stage, device
):
    data = UCIBenchmark.load("tiny", tiny)
    s = replace(TINY, epochs_multiplier=5, device=device)  # 10 epochs
    whole = run_uci(data, tiny_method(method), [0, 1], tiny / "whole", s, log=lambda m: None)
    original = runs_module.train_runs

    def stop_at_epoch_4(*args, **kwargs):
        desc, checkpoint = args[6], args[-1]
        checkpoint.every = 0.0  # keep the state after every epoch

        def on_epoch(e):
            if stage in desc and e == 4:
                raise KeyboardInterrupt

        return original(*args[:-2], on_epoch, checkpoint)

    monkeypatch.setattr(runs_module, "train_runs", stop_at_epoch_4)
    out = tiny / "stopped"
    with pytest.raises(KeyboardInterrupt):
        run_uci(data, tiny_method(method), [0, 1], out, s, log=lambda m: None)
    (kept,) = out.glob("*.train.pt")
    assert len(read_checkpoint(kept)["history"]) == 4
    runs = 8 if stage == "grid" else 2  # mc-dropout's 2 x 4 grid points; Concrete's 2 final models
    lines = status(out)
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

    monkeypatch.setattr(runs_module, "train_runs", record)
    resumed = run_uci(data, tiny_method(method), [0, 1], out, s, log=lambda m: None)
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
    assert status(out) == []
    assert main(["uci-status", str(out)]) == 0
    assert "no training in progress" in capsys.readouterr().out
    assert main(["uci-status", str(tiny / "nowhere")]) == 2
    assert "no results folder" in capsys.readouterr().err
    # a checkpoint of other runs is not used as if it were these
    other = tiny / "other"
    other.mkdir()
    torch.save({"key": "else", "history": [], "format": 2}, other / kept.name)
    with pytest.raises(ValueError, match="holds the training of other runs or settings"):
        run_uci(data, tiny_method(method), [0, 1], other, s, log=lambda m: None)


def test_a_method_fitted_split_by_split_keeps_each_split_as_it_ends(tiny, monkeypatch):
    data, method = UCIBenchmark.load("tiny", tiny), tiny_method("sgp")
    calls, original = [], type(method).fit_split

    def fit_then_stop(self, *args, **kwargs):
        calls.append(args)  # the second split stops as Ctrl-C would stop it
        if len(calls) == 2:
            raise KeyboardInterrupt
        return original(self, *args, **kwargs)

    monkeypatch.setattr(type(method), "fit_split", fit_then_stop)
    out = tiny / "stopped"
    with pytest.raises(KeyboardInterrupt):
        run_uci(data, method, [0, 1], out, TINY, log=lambda m: None)
    assert sorted(p.name for p in out.iterdir()) == ["tiny_sgp_split00.json"]
    first = json.loads((out / "tiny_sgp_split00.json").read_text())
    assert first["splits_run_together"] == 1 and first["seconds"] == first["protocol_seconds"] > 0
    messages: list[str] = []
    results = run_uci(data, method, [0, 1], out, TINY, log=messages.append)
    assert len(calls) == 3  # only split 1 fitted again
    assert any("keeping finished splits [0]" in m for m in messages)
    assert any("split 1 in" in m for m in messages)
    assert [r["split"] for r in results] == [0, 1] and results[0] == first
