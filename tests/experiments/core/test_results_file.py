"""Results are never lost: keyed by the command and every setting, written atomically, never
through a link (docs/reliability.md)."""

from __future__ import annotations

import json

import pytest

from pyro_dropout_experiments.core import (
    naming_command,
    open_results,
    resume_runs,
    save_figure,
    save_results,
    write_atomically,
)
from pyro_dropout_experiments.core.atomic import replace_atomically


def test_a_link_is_refused_and_what_it_points_to_is_untouched(tmp_path):
    outside = tmp_path / "outside.json"
    outside.write_text("precious")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "results.json").symlink_to(outside)
    with pytest.raises(ValueError, match=r"results\.json is a symbolic link"):
        save_results(tmp_path / "out", {"settings": {}})
    with pytest.raises(ValueError, match="symbolic link"):
        open_results(tmp_path / "out", {})
    assert outside.read_text() == "precious"


def test_a_figure_is_not_written_through_a_link(tmp_path):
    from pyro_dropout.export import pyplot

    outside = tmp_path / "elsewhere.png"
    outside.write_text("precious")
    (tmp_path / "fig.png").symlink_to(outside)
    fig = pyplot().figure()
    with pytest.raises(ValueError, match=r"fig\.png is a symbolic link"):
        save_figure(fig, tmp_path / "fig.png")
    assert outside.read_text() == "precious"
    save_figure(fig, tmp_path / "real.png")
    assert (tmp_path / "real.png").read_bytes()[:4] == b"\x89PNG"


def test_a_write_that_stops_leaves_the_old_file_and_no_debris(tmp_path):
    path = tmp_path / "results.json"
    write_atomically(path, "old")

    def stops(temporary):
        temporary.write_text("half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        replace_atomically(path, stops)
    assert path.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.json"]


def test_one_commands_file_is_never_taken_as_anothers(tmp_path):
    with naming_command("rl"):
        save_results(tmp_path, {"settings": {"batches": 5}, "runs": {}})
    with naming_command("bandit"), pytest.raises(ValueError, match=r"holds the results of `pyro-dropout rl`"):
        open_results(tmp_path, {"batches": 5})
    assert json.loads((tmp_path / "results.json").read_text())["command"] == "rl"


def test_other_settings_are_refused_naming_each_difference(tmp_path):
    with naming_command("mnist bbalpha"):
        save_results(tmp_path, {"settings": {"mnist": {"lr": 0.1}, "bbalpha": {"particles": 2}}})
        with pytest.raises(ValueError) as error:
            open_results(tmp_path, {"mnist": {"lr": 0.1}, "bbalpha": {"particles": 3}}, resume=True)
    message = str(error.value)
    assert f"--out {tmp_path}" in message and "bbalpha.particles=2 there, 3 here" in message
    assert "lr" not in message  # only what differs
    assert "\n" not in message


def test_a_rerun_with_the_same_settings_resumes_and_may_ask_for_more_runs(tmp_path):
    with naming_command("rl"):
        record = resume_runs(tmp_path, {"lr": 0.1, "repeats": 1}, ("repeats",))
        record["runs"]["thompson"] = {"0": {"regret": 1.0}}
        save_results(tmp_path, record)
        again = resume_runs(tmp_path, {"lr": 0.1, "repeats": 2}, ("repeats",))
    assert again["runs"] == {"thompson": {"0": {"regret": 1.0}}}
    assert again["settings"]["repeats"] == 2 and again["command"] == "rl"


def test_a_fresh_run_is_not_handed_the_kept_runs_without_resume(tmp_path):
    save_results(tmp_path, {"settings": {"a": 1}, "runs": {"x": 1}})
    assert "runs" not in open_results(tmp_path, {"a": 1})


def test_an_edited_or_odd_results_file_is_refused_by_name(tmp_path):
    import os

    out = tmp_path / "out"
    save_results(out, {"settings": {"a": 1}, "runs": {"x": [1.0]}})
    path = out / "results.json"
    text = path.read_text()
    path.write_text(text.replace("1.0", "NaN"))  # edited by hand
    with pytest.raises(ValueError, match=r"results\.json: holds NaN \(results are finite numbers\)"):
        open_results(out, {"a": 1}, resume=True)
    path.write_text('{"settings": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(ValueError, match="nested too deeply"):
        open_results(out, {"a": 1})
    path.unlink()
    os.mkfifo(path)  # reading it would block forever
    with pytest.raises(ValueError, match="not a regular file"):
        open_results(out, {"a": 1})
    path.unlink()
    with pytest.raises(ValueError, match="a result to write is NaN or infinite; nothing was written"):
        save_results(out, {"settings": {}, "runs": {"x": float("inf")}})
    assert not path.exists()


def test_files_get_the_mode_the_umask_gives(tmp_path):
    import os

    mask = os.umask(0o022)
    try:
        write_atomically(tmp_path / "a.json", "{}")
        os.umask(0o077)
        write_atomically(tmp_path / "b.json", "{}")
    finally:
        os.umask(mask)
    assert (tmp_path / "a.json").stat().st_mode & 0o777 == 0o644  # mkstemp alone: 0o600
    assert (tmp_path / "b.json").stat().st_mode & 0o777 == 0o600


def test_a_file_from_before_a_setting_resumes_with_the_value_that_ran_as_it_did(tmp_path):
    """A setting added later (``since``: the value that does what the command did before) matches a
    kept file that lacks it at that value only; any other value is refused, naming it."""
    save_results(tmp_path, {"settings": {"lr": 0.1, "repeats": 1}, "runs": {"a": {"0": {}}}})
    kept = resume_runs(tmp_path, {"lr": 0.1, "repeats": 2, "steps": 0}, ("repeats",), since={"steps": 0})
    assert kept["runs"] == {"a": {"0": {}}} and kept["settings"]["steps"] == 0
    with pytest.raises(ValueError, match=r"steps=0 there, 400 here"):
        resume_runs(tmp_path, {"lr": 0.1, "repeats": 2, "steps": 400}, ("repeats",), since={"steps": 0})
    with pytest.raises(ValueError, match=r"steps=None there, 0 here"):
        resume_runs(tmp_path, {"lr": 0.1, "repeats": 2, "steps": 0}, ("repeats",))  # nothing said: refused
