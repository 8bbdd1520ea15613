"""The results store: versioned JSON written atomically, and every bad file named when read."""

import json

import pytest

from pyro_dropout_experiments.core import ResultStore, read_record, resume_runs, write_record
from pyro_dropout_experiments.core.store import RESULT_FIELDS, SCHEMA_VERSION
from pyro_dropout_experiments.uci import collect

GOOD = {"dataset": "d", "method": "mc-dropout", "split": 0, "rmse": 1.0, "test_ll": -1.0}


def test_written_records_carry_the_schema_version_and_read_back(tmp_path):
    store = ResultStore(tmp_path)
    path = store.result_path("d", "mc-dropout", 0)
    store.write(path, GOOD)
    assert path.name == "d_mc-dropout_split00.json" and not list(tmp_path.glob("*.partial"))
    assert store.read_result(path) == {"schema_version": SCHEMA_VERSION, **GOOD}
    assert store.results() == [path] and store.grid_path("d", "x", 3).name == "d_x_split03.grid.json"


BAD = [
    ("", "not valid JSON"),
    ('{"dataset": "d", "method"', "not valid JSON"),
    ("[1, 2]", "expected a JSON object, found a list"),
    (json.dumps({**GOOD, "rmse": None}), "field 'rmse' is None, not of type float"),
    (json.dumps({k: v for k, v in GOOD.items() if k != "rmse"}), "no field 'rmse'"),
    (json.dumps({"hello": "world"}), "no field 'dataset'"),
    (json.dumps({**GOOD, "split": "0"}), "field 'split' is '0', not of type int"),
    (json.dumps({**GOOD, "split": True}), "field 'split' is True"),
    (json.dumps({**GOOD, "rmse": float("nan")}), "field 'rmse' is nan"),
    (json.dumps({**GOOD, "schema_version": 99}), "written by a newer version"),
]


@pytest.mark.parametrize(("text", "message"), BAD, ids=[m for _, m in BAD])
def test_a_bad_result_file_is_an_error_naming_it(tmp_path, text, message):
    path = tmp_path / "d_mc-dropout_split00.json"
    path.write_text(text)
    with pytest.raises(ValueError, match="d_mc-dropout_split00.json: " + message.replace("(", r"\(")):
        read_record(path, RESULT_FIELDS)
    with pytest.raises(ValueError, match="remove the file to run it again"):
        collect(tmp_path)  # the table reads the folder: the same error, not a KeyError


def test_a_file_that_is_not_text_is_named(tmp_path):
    path = tmp_path / "x.json"
    path.write_bytes(b"\xff\xfe\x00binary")
    with pytest.raises(ValueError, match=r"x\.json: not"):
        read_record(path, RESULT_FIELDS)


def test_runs_resume_when_only_the_settings_naming_which_runs_differ(tmp_path):
    path = tmp_path / "results.json"
    assert resume_runs(tmp_path, {"lr": 0.1, "repeats": 1}, ("repeats",)) == {
        "settings": {"lr": 0.1, "repeats": 1},
        "runs": {},
    }
    write_record(path, {"settings": {"lr": 0.1, "repeats": 1, "sizes": (1, 2)}, "runs": {"a": {"0": 5}}})
    more = resume_runs(tmp_path, {"lr": 0.1, "repeats": 3, "sizes": (1, 2)}, ("repeats",))
    assert more["runs"] == {"a": {"0": 5}} and more["settings"]["repeats"] == 3
    # runs made with another learning rate are refused, never dropped
    with pytest.raises(ValueError, match=r"other settings \(lr=0\.1 there, 0\.2 here\)"):
        resume_runs(tmp_path, {"lr": 0.2, "repeats": 1, "sizes": (1, 2)}, ("repeats",))
    assert read_record(path, {"runs": (dict,)})["runs"] == {"a": {"0": 5}}
    path.write_text("[1, 2]")
    with pytest.raises(ValueError, match=r"results\.json: expected a JSON object"):
        resume_runs(tmp_path, {"lr": 0.1}, ())


def test_a_planted_partial_link_is_never_written_through(tmp_path):
    outside = tmp_path / "outside"
    outside.write_text("precious")
    (tmp_path / "d_mc-dropout_split00.json.partial").symlink_to(outside)
    path = tmp_path / "d_mc-dropout_split00.json"
    write_record(path, {"settings": {}})
    assert outside.read_text() == "precious" and read_record(path, {"settings": (dict,)})["settings"] == {}
    path.unlink()
    path.symlink_to(outside)
    with pytest.raises(ValueError, match="symbolic link"):
        write_record(path, {"settings": {}})
    assert outside.read_text() == "precious"
