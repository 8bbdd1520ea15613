r"""The UCI regression data sets with their standard splits (Hernández-Lobato & Adams 2015; Gal 2016).

Layout of a data set ``<data_dir>/uci/<name>/data/``:

* ``data.txt``: a whitespace matrix; ``index_features.txt`` and ``index_target.txt`` hold
  0-based column indices of the inputs and the target;
* ``index_train_<i>.txt`` / ``index_test_<i>.txt``: 0-based rows of split ``i``;
* ``n_splits.txt``: the number of splits.

The published protocol's settings beside them (``n_hidden.txt``, ``n_epochs.txt``,
``dropout_rates.txt``, ``tau_values.txt``) belong to the benchmark, not the data: they are read
by :mod:`pyro_dropout_experiments.uci`. Any data set in this layout works. The files are those of
the MC-dropout paper's public experiments (``UCI_Datasets/``; CC BY-NC 4.0);
:func:`~pyro_dropout.datasets.download_uci` fetches them and checks their SHA-256.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

import numpy as np

from .base import Dataset, Split, read_indices, read_scalar

__all__ = [
    "ENV",
    "UCI_DATASETS",
    "available_uci",
    "check_name",
    "default_data_dir",
    "load_uci",
    "uci_directory",
]

UCI_DATASETS = (
    "bostonHousing",
    "concrete",
    "kin8nm",
    "naval-propulsion-plant",
    "power-plant",
    "protein-tertiary-structure",
    "wine-quality-red",
)
ENV = "PYRO_DROPOUT_DATA"


def default_data_dir() -> Path:
    """``$PYRO_DROPOUT_DATA``, else ``../shared/data`` beside a source checkout, else ``./data``."""
    env = os.environ.get(ENV)
    if env:
        return Path(env)
    beside_checkout = Path(__file__).resolve().parents[3] / "shared" / "data"
    return beside_checkout if beside_checkout.is_dir() else Path("data")


def check_name(name: str) -> None:
    """A data set is a folder name, never a path: ``../x`` must not reach outside the data folder."""
    if not name or name in (".", "..") or "/" in name or "\\" in name or name != Path(name).name:
        raise ValueError(f"data set name {name!r} is not a plain folder name (no '/', '\\\\' or '..')")


def uci_directory(name: str, data_dir: str | Path | None = None) -> Path:
    """The folder holding ``data.txt`` of data set ``name``; a clear error if it is missing."""
    check_name(name)
    root = Path(data_dir) if data_dir is not None else default_data_dir()
    for candidate in (root / "uci" / name / "data", root / name / "data"):
        if (candidate / "data.txt").is_file():
            return candidate
    raise FileNotFoundError(not_found_message(name, root))


def available_uci(root: Path) -> list[str]:
    """The data sets in the UCI layout under ``root/uci`` (or ``root``), by folder name."""
    names = {
        folder.name
        for base in (root / "uci", root)
        if base.is_dir()
        for folder in base.iterdir()
        if (folder / "data" / "data.txt").is_file()
    }
    return sorted(names)


def not_found_message(name: str, root: Path) -> str:
    """Where the data set was looked for, the names that are there, and how to get the files."""
    found = available_uci(root)
    close = difflib.get_close_matches(name, sorted({*found, *UCI_DATASETS}), n=1, cutoff=0.6)
    message = f"UCI data set '{name}' not found: expected {root / 'uci' / name / 'data' / 'data.txt'}"
    message += f" and its split files. Data sets in {root}: {', '.join(found) if found else 'none'}."
    if close and close[0] != name:
        message += f" Did you mean '{close[0]}'?"
    # a benchmark data set that is not here (the name given, or the one meant) can be downloaded
    wanted = name if name in UCI_DATASETS else (close[0] if close and close[0] in UCI_DATASETS else None)
    if wanted is not None and wanted not in found:
        message += (
            f" Point --data-dir (or ${ENV}) at the folder that holds uci/, or fetch the files with "
            f"`pyro-dropout download {wanted} --data-dir DIR` (checksums verified)."
        )
    elif not found:
        message += f" The published benchmark's data sets: {', '.join(UCI_DATASETS)}."
    return message


def _columns(folder: Path, n_columns: int) -> tuple[np.ndarray, int]:
    features = read_indices(folder / "index_features.txt", n_columns, unit="columns")
    target = read_indices(folder / "index_target.txt", n_columns, unit="columns")
    if target.size != 1:
        raise ValueError(f"{folder / 'index_target.txt'}: expected one column index, found {target.size}")
    if int(target[0]) in set(features.tolist()):
        raise ValueError(
            f"{folder / 'index_features.txt'}: the feature columns include the target column {int(target[0])}"
        )
    return features, int(target[0])


def _split(folder: Path, i: int, n_rows: int) -> Split:
    train = read_indices(folder / f"index_train_{i}.txt", n_rows)
    test = read_indices(folder / f"index_test_{i}.txt", n_rows)
    overlap = np.intersect1d(train, test)
    if len(overlap):
        raise ValueError(
            f"{folder / f'index_test_{i}.txt'}: split {i}'s training and test rows overlap "
            f"({len(overlap)} rows, e.g. row {int(overlap[0])})"
        )
    return Split(train, test)


MAX_DATA_BYTES = 2**30  # a data.txt above 1 GiB is not a UCI regression set (the largest is 11 MB)
FLOAT32_MAX = float(np.finfo(np.float32).max)  # the networks train in float32


def _matrix(path: Path) -> np.ndarray:
    """``data.txt``'s numbers, the file checked first: a regular text file of a sane size."""
    if not path.is_file():
        raise ValueError(f"{path}: not a regular file")
    size = path.stat().st_size
    if size > MAX_DATA_BYTES:
        raise ValueError(
            f"{path}: {size / 2**30:.1f} GiB, larger than a UCI data set could be (at most 1 GiB)"
        )
    with path.open("rb") as handle:
        if b"\0" in handle.read(1 << 16):
            raise ValueError(f"{path}: not a text file (it holds NUL bytes)")
    try:
        return np.loadtxt(path, ndmin=2)
    except ValueError as e:
        raise ValueError(f"{path}: not a matrix of numbers ({e})") from None


def load_uci(name: str, data_dir: str | Path | None = None) -> Dataset:
    """Load data set ``name`` (see the module docstring for the layout), every file checked."""
    folder = uci_directory(name, data_dir)
    data = _matrix(folder / "data.txt")
    features, target = _columns(folder, data.shape[1])
    n_splits = int(read_scalar(folder / "n_splits.txt", int, minimum=1))
    splits = [_split(folder, i, len(data)) for i in range(n_splits)]
    x, y = data[:, features], data[:, target]
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValueError(f"{folder / 'data.txt'}: contains NaN or inf")
    big = np.argwhere(np.abs(data) > FLOAT32_MAX)
    if len(big):
        row, column = (int(v) for v in big[0])
        raise ValueError(
            f"{folder / 'data.txt'}, line {row + 1}, column {column + 1}: {data[row, column]:g} is beyond "
            "float32's range (the networks train in float32)"
        )
    return Dataset(name=name, x=x, y=y, splits=splits, task="regression", files={"folder": folder})
