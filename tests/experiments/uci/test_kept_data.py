"""A kept split result is reused only for its own data set and the data it was made from."""

import json
import shutil

import numpy as np
import pytest

from pyro_dropout_experiments.uci import UCIBenchmark, run_uci
from tests.uci_data import TINY, tiny_method


def _quiet(message):
    return None


def test_a_result_of_changed_data_or_of_another_data_set_is_refused(tiny):
    out = tiny / "out"
    data = UCIBenchmark.load("tiny", tiny)
    run_uci(data, tiny_method("mc-dropout"), [0], out, TINY, log=_quiet)
    stored = json.loads((out / "tiny_mc-dropout_split00.json").read_text())
    assert len(stored["settings"]["data_sha256"]) == 64
    assert run_uci(data, tiny_method("mc-dropout"), [0], out, TINY, log=_quiet)[0] == stored  # kept
    # the targets ten times larger: the same files, another digest
    path = tiny / "uci" / "tiny" / "data" / "data.txt"
    table = np.loadtxt(path)
    table[:, -1] *= 10
    np.savetxt(path, table)
    changed = UCIBenchmark.load("tiny", tiny)
    with pytest.raises(ValueError, match=r"split00\.json was made from other data than tiny's"):
        run_uci(changed, tiny_method("mc-dropout"), [0], out, TINY, log=_quiet)
    # a result of another data set under this one's name
    (out / "tiny_mc-dropout_split00.json").write_text(json.dumps({**stored, "dataset": "wine"}))
    with pytest.raises(ValueError, match="holds split 0 of 'mc-dropout' on 'wine', not split 0"):
        run_uci(changed, tiny_method("mc-dropout"), [0], out, TINY, log=_quiet)


def test_a_kept_file_that_is_not_a_regular_file_or_holds_nan_is_refused(tiny):
    out = tiny / "out"
    data = UCIBenchmark.load("tiny", tiny)
    run_uci(data, tiny_method("mc-dropout"), [0], out, TINY, log=_quiet)
    result = out / "tiny_mc-dropout_split00.json"
    shutil.move(result, out / "kept.json")
    import os

    os.mkfifo(result)  # reading a FIFO would block forever
    with pytest.raises(ValueError, match="not a regular file"):
        run_uci(data, tiny_method("mc-dropout"), [0], out, TINY, log=_quiet)
