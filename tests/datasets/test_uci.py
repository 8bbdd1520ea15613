"""The UCI loader, its download, and its checks of the files it reads."""

import os

import pytest

from pyro_dropout.datasets import Dataset, download_uci, load_uci, uci_directory
from pyro_dropout_experiments.uci import UCIBenchmark


def test_loader_and_missing_data(tiny, tmp_path):
    data = load_uci("tiny", tiny)
    assert isinstance(data, Dataset) and data.task == "regression"
    assert data.x.shape == (60, 4) and data.y.shape == (60,) and data.n_splits == 3
    bench = UCIBenchmark.load("tiny", tiny)  # the data with the protocol's published settings
    assert bench.n_hidden == 8 and bench.n_epochs == 2
    assert bench.dropout_rates == [0.01, 0.1] and bench.tau_values == [0.5, 2.0]
    with pytest.raises(FileNotFoundError, match="pyro-dropout download bostonHousing"):
        uci_directory("bostonHousing", tmp_path / "empty")
    # a misspelt name: the data sets that are there, the closest one, no download of a set that does not exist
    with pytest.raises(FileNotFoundError, match=r"Data sets in .*: tiny\. Did you mean 'tiny'\?") as caught:
        uci_directory("tine", tiny)
    assert "download-uci" not in str(caught.value)
    with pytest.raises(
        FileNotFoundError, match=r"none\. Did you mean 'bostonHousing'\?.*pyro-dropout download bostonHousing"
    ):
        uci_directory("bostonhousing", tmp_path / "empty")
    with pytest.raises(FileNotFoundError, match="benchmark's data sets: bostonHousing, concrete"):
        uci_directory("energy", tmp_path / "empty")


def _data_folder(root):
    return root / "uci" / "tiny" / "data"


BAD_FILES = [
    ("index_train_1.txt", "-1\n2\n3\n", r"index_train_1\.txt, line 1: index -1 is negative"),
    ("index_train_1.txt", "1\n2\n2\n", r"index_train_1\.txt, lines 2 and 3: index 2 appears twice"),
    ("index_train_1.txt", "1\n2.5\n", r"index_train_1\.txt, line 2: index 2\.5 is not a whole number"),
    ("index_train_1.txt", "1\n60\n", r"index_train_1\.txt, line 2: index 60 is beyond the 60 rows"),
    ("index_test_2.txt", "", r"index_test_2\.txt: no indices \(the file is empty\)"),
    ("index_test_2.txt", "a\nb\n", r"index_test_2\.txt: not a list of numbers"),
    (
        "index_features.txt",
        "0\n1\n4\n",
        r"index_features\.txt: the feature columns include the target column 4",
    ),
    ("index_features.txt", "0\n9\n", r"index_features\.txt, line 2: index 9 is beyond the 5 columns"),
    ("index_target.txt", "3\n4\n", r"index_target\.txt: expected one column index, found 2"),
    ("n_splits.txt", "0\n", r"n_splits\.txt, line 1: expected at least 1, found 0"),
    ("n_hidden.txt", "0\n", r"n_hidden\.txt, line 1: expected at least 1, found 0"),
    ("n_hidden.txt", "12.5\n", r"n_hidden\.txt, line 1: expected a whole number, found 12\.5"),
    ("n_epochs.txt", "", r"n_epochs\.txt: expected one number, found 0"),
    ("dropout_rates.txt", "0.1\n1.0\n", r"dropout_rates\.txt: a drop probability must be below 1"),
    ("tau_values.txt", "0\n", r"tau_values\.txt: a precision must be positive"),
    ("data.txt", "1 2 x\n", r"data\.txt: not a matrix of numbers"),
    ("data.txt", "\0" * 1000, r"data\.txt: not a text file \(it holds NUL bytes\)"),
]


def test_a_value_beyond_float32_is_named_with_its_line(tiny):
    path = _data_folder(tiny) / "data.txt"
    lines = path.read_text().splitlines()
    values = lines[6].split()
    values[1] = "1e39"  # finite as a double, inf in the float32 the networks train in
    lines[6] = " ".join(values)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=r"data\.txt, line 7, column 2: 1e\+39 is beyond float32's range"):
        UCIBenchmark.load("tiny", tiny)


@pytest.mark.parametrize(
    ("name", "text", "message"), BAD_FILES, ids=[m.split(":")[0] + " " + t[:6] for n, t, m in BAD_FILES]
)
def test_a_bad_data_file_is_an_error_naming_the_file_and_line(tiny, name, text, message):
    (_data_folder(tiny) / name).write_text(text)
    with pytest.raises(ValueError, match=message):
        UCIBenchmark.load("tiny", tiny)


def test_a_split_whose_rows_overlap_is_refused(tiny):
    folder = _data_folder(tiny)
    test_rows = (folder / "index_test_0.txt").read_text().split()
    (folder / "index_train_0.txt").write_text("\n".join([*test_rows[:1], "59"]) + "\n")
    with pytest.raises(ValueError, match=r"index_test_0\.txt: split 0's training and test rows overlap"):
        load_uci("tiny", tiny)


@pytest.mark.parametrize("name", ["../tiny", "..", "a/b", "", "x\\y"])
def test_a_data_set_name_never_reaches_outside_the_data_folder(tiny, name):
    with pytest.raises(ValueError, match="not a plain folder name"):
        load_uci(name, tiny / "uci" / "tiny")


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
