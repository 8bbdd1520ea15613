r"""MNIST, Fashion-MNIST and notMNIST from their idx files (gzip or not), read as untrusted data.

An idx file is a big-endian header (two zero bytes, a type code, the number of dimensions, one
32-bit size per dimension) and the raw values. Both spellings of the names are accepted
(``train-images-idx3-ubyte`` and ``train-images.idx3-ubyte``), each with or without ``.gz``. A
file that is missing, truncated, of the wrong kind, or whose labels do not match its images is an
error naming the file. Images come as float32 in [0, 1], ``[n, 1, 28, 28]``; labels as int64.
"""

from __future__ import annotations

import gzip
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .uci import check_name, default_data_dir

__all__ = ["IMAGE_SETS", "ImageData", "find_idx", "load_images", "read_idx"]

IMAGE_SETS = ("mnist", "fashion-mnist", "notmnist")
_UBYTE = 0x08


def find_idx(folder: Path, stem: str, kind: str) -> Path:
    """The file of ``stem`` (``train-images``) and ``kind`` (``idx3``) in ``folder``, in any of
    the four spellings; a ``FileNotFoundError`` listing them if there is none."""
    names = [f"{stem}{sep}{kind}-ubyte{gz}" for sep in ("-", ".") for gz in (".gz", "")]
    for name in names:
        if (folder / name).is_file():
            return folder / name
    raise FileNotFoundError(f"{folder}: no {stem} file (looked for {', '.join(names)})")


def _payload(path: Path) -> bytes:
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
        return gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
    except (OSError, EOFError, gzip.BadGzipFile) as error:
        raise ValueError(f"{path}: not a readable (gzip) idx file ({error})") from None


def read_idx(path: str | Path, dims: int) -> np.ndarray:
    """The unsigned-byte array of ``dims`` dimensions stored in idx file ``path``."""
    path = Path(path)
    data = _payload(path)
    if len(data) < 4 + 4 * dims:
        raise ValueError(f"{path}: {len(data)} bytes, too short for an idx header of {dims} dims")
    zero, code, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0 or code != _UBYTE or ndim != dims:
        magic = int.from_bytes(data[:4], "big")
        raise ValueError(
            f"{path}: magic number {magic:#010x} is not that of an unsigned-byte idx file of {dims} dims "
            f"({0x0800 + dims:#010x})"
        )
    shape = struct.unpack(f">{dims}I", data[4 : 4 + 4 * dims])
    size = int(np.prod(shape, dtype=np.int64))
    body = data[4 + 4 * dims :]
    if len(body) != size:
        raise ValueError(f"{path}: header says {shape} = {size} values, the file holds {len(body)}")
    return np.frombuffer(body, dtype=np.uint8).reshape(shape)


@dataclass
class ImageData:
    """Images ``x`` ``[n, 1, 28, 28]`` (float32 in [0, 1]) and labels ``y`` ``[n]`` (int64)."""

    name: str
    x: np.ndarray
    y: np.ndarray

    def __len__(self) -> int:
        return len(self.y)

    def subset(self, rows: np.ndarray) -> ImageData:
        return ImageData(self.name, self.x[rows], self.y[rows])


def load_images(name: str, part: str = "train", data_dir: str | Path | None = None) -> ImageData:
    """Part ``"train"`` or ``"test"`` of image set ``name`` (:data:`IMAGE_SETS`) from
    ``<data_dir>/<name>/`` (default: :func:`~pyro_dropout.datasets.default_data_dir`)."""
    check_name(name)
    if part not in ("train", "test"):
        raise ValueError(f"part must be 'train' or 'test', got {part!r}")
    folder = (Path(data_dir) if data_dir is not None else default_data_dir()) / name
    if not folder.is_dir():
        raise FileNotFoundError(
            f"{folder}: no such folder; give the data directory (--data-dir or $PYRO_DROPOUT_DATA), or "
            "download the files (pyro_dropout.datasets.download_images)"
        )
    prefix = "train" if part == "train" else "t10k"
    images_path, labels_path = (
        find_idx(folder, f"{prefix}-images", "idx3"),
        find_idx(folder, f"{prefix}-labels", "idx1"),
    )
    images, labels = read_idx(images_path, 3), read_idx(labels_path, 1)
    if len(images) != len(labels):
        raise ValueError(f"{labels_path}: {len(labels)} labels for the {len(images)} images of {images_path}")
    if labels.size and int(labels.max()) > 9:
        raise ValueError(f"{labels_path}: label {int(labels.max())} is not a class 0-9")
    x = (images.astype(np.float32) / 255.0)[:, None]
    return ImageData(name, x, labels.astype(np.int64))
