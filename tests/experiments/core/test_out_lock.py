"""Two commands on one --out take turns, and both results are there afterwards."""

import json
import os
import subprocess
import sys
import threading
import time

import pytest

from pyro_dropout_experiments.core import holding_out


def test_a_second_holder_waits_for_the_first(tmp_path, capsys):
    order = []
    release = threading.Event()

    def first():
        with holding_out(tmp_path / "out", "one"):
            order.append("first in")
            release.wait(10)
            order.append("first out")

    thread = threading.Thread(target=first)
    thread.start()
    while not order:
        time.sleep(0.01)
    threading.Timer(0.3, release.set).start()
    with holding_out(tmp_path / "out", "two"):  # another open file description: it waits
        order.append("second in")
    thread.join()
    assert order == ["first in", "first out", "second in"]
    assert "another run is writing to --out" in capsys.readouterr().err


def test_a_folder_made_for_a_command_that_wrote_nothing_is_removed(tmp_path):
    with holding_out(tmp_path / "new", "x"):
        assert (tmp_path / "new").is_dir()
    assert not (tmp_path / "new").exists()
    with holding_out(tmp_path / "kept", "x"):
        (tmp_path / "kept" / "results.json").write_text("{}")
    assert (tmp_path / "kept" / "results.json").is_file()


@pytest.mark.slow
def test_two_runs_started_together_on_one_out_both_keep_their_results(tmp_path):
    out = tmp_path / "out"
    common = [
        "synthetic",
        "--width",
        "8",
        "--steps",
        "20",
        "--num-samples",
        "10",
        "--quiet",
        "--out",
        str(out),
    ]
    code = "import sys; from pyro_dropout_experiments.cli import main; sys.exit(main(sys.argv[1:]))"
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", code, *common, "--sizes", size], stderr=subprocess.PIPE, text=True
        )
        for size in ("10", "12")
    ]
    errors = [run.communicate(timeout=600)[1] for run in runs]
    assert [run.returncode for run in runs] == [0, 0], errors
    results = json.loads((out / "results.json").read_text())
    assert sorted(results["per_size"]) == ["10", "12"]
    assert any("waiting for it to finish" in e for e in errors)  # they took turns
    assert oct(os.stat(out / "results.json").st_mode & 0o777) == oct(0o666 & ~_umask())


def _umask():
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
