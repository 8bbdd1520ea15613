"""One battery for every named UCI method (as GPyTorch's shared test cases): what it stores, that a
rerun keeps and a stopped run resumes exactly, and that the table shows it. A method added to
``BUILT_IN`` is checked here with no new test."""

from __future__ import annotations

import math

import pytest

from pyro_dropout_experiments.uci import (
    UCIBenchmark,
    collect,
    label,
    markdown_table,
    method_class,
    method_names,
    run_uci,
)
from pyro_dropout_experiments.uci import protocol as protocol_module
from tests.uci_data import TINY, stop_training_when, tiny_method

SCORES = ("rmse", "test_ll", "coverage_50", "coverage_90", "coverage_95")
KEPT = (*SCORES, "rmse_standard", "validation", "p", "tau", "learned_p", "split", "settings")


def _quiet(message: str) -> None:
    pass


@pytest.fixture(params=method_names())
def method(request):
    return request.param


def test_every_method_stores_scores_of_the_right_shape(method, tiny):
    data = UCIBenchmark.load("tiny", tiny)
    results = run_uci(data, tiny_method(method), [0, 1], tiny / "out", TINY, log=_quiet)
    name = label(method, TINY.per_example_masks, TINY.hidden_layers, TINY.retrain)
    assert [r["split"] for r in results] == [0, 1]
    for r in results:
        assert r["method"] == method and r["dataset"] == "tiny" and (r["n_train"], r["n_test"]) == (50, 10)
        assert all(math.isfinite(r[k]) for k in SCORES), {k: r[k] for k in SCORES}
        assert r["rmse"] > 0 and 0 <= r["coverage_50"] <= r["coverage_90"] <= r["coverage_95"] <= 1
        assert (tiny / "out" / f"tiny_{name}_split{r['split']:02d}.json").is_file()
    assert sorted(p.name for p in (tiny / "out").iterdir()) == [
        f"tiny_{name}_split00.json",
        f"tiny_{name}_split01.json",
    ]  # no grid search or checkpoint is left behind


def _same(a: dict, b: dict) -> bool:
    return {k: a[k] for k in KEPT if k in a} == {k: b[k] for k in KEPT if k in a}


def test_every_method_keeps_its_results(method, tiny, monkeypatch):
    data = UCIBenchmark.load("tiny", tiny)
    first = run_uci(data, tiny_method(method), [0, 1], tiny / "out", TINY, log=_quiet)
    trained: list = []
    original, cls = protocol_module.train_and_score, method_class(method)[0]
    monkeypatch.setattr(
        protocol_module, "train_and_score", lambda *a, **k: (trained.append(a[-1]), original(*a, **k))[1]
    )
    monkeypatch.setattr(cls, "fit_split", lambda *a, **k: trained.append("fit_split"))
    again = run_uci(data, tiny_method(method), [0, 1], tiny / "out", TINY, log=_quiet)
    assert not trained  # kept, nothing trained
    assert all(_same(a, b) for a, b in zip(first, again, strict=True))


def test_every_method_resumes_a_stopped_run_exactly(method, tiny, monkeypatch):
    """Stopped in its last stage (a network's final training; the second split of a method fitted
    split by split), the run resumes and ends where an unstopped one does, bit for bit."""
    data = UCIBenchmark.load("tiny", tiny)
    whole = run_uci(data, tiny_method(method), [0, 1], tiny / "whole", TINY, log=_quiet)
    cls = method_class(method)[0]
    if cls.fits_splits:
        original, calls = cls.fit_split, []

        def stop_at_the_second(self, *args, **kwargs):
            calls.append(1)
            if len(calls) == 2:
                raise KeyboardInterrupt
            return original(self, *args, **kwargs)

        monkeypatch.setattr(cls, "fit_split", stop_at_the_second)
    else:
        stop_training_when(monkeypatch, lambda calls: "final" in calls[-1][0])
    with pytest.raises(KeyboardInterrupt):
        run_uci(data, tiny_method(method), [0, 1], tiny / "out", TINY, log=_quiet)
    monkeypatch.undo()
    resumed = run_uci(data, tiny_method(method), [0, 1], tiny / "out", TINY, log=_quiet)
    assert all(_same(a, b) for a, b in zip(whole, resumed, strict=True))


def test_every_method_has_its_column_in_the_table(method, tiny):
    data = UCIBenchmark.load("tiny", tiny)
    run_uci(data, tiny_method(method), [0, 1, 2], tiny / "out", TINY, log=_quiet)
    table = markdown_table(collect(tiny / "out"))
    name = label(method, TINY.per_example_masks, TINY.hidden_layers, TINY.retrain)
    header = next(line for line in table.splitlines() if line.startswith("| data set"))
    assert f" {name} " in header
    row = next(line for line in table.splitlines() if line.startswith("| tiny"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    column = [c.strip() for c in header.strip("|").split("|")].index(name)
    assert "±" in cells[column]  # a mean and its standard error over the three splits
