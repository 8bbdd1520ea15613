r"""MNIST, Fashion-MNIST and notMNIST from their idx files (gzip or not), read as untrusted data.

An idx file is a big-endian header (two zero bytes, a type code, the number of dimensions, one
32-bit size per dimension) and the raw values. Both spellings of the names are accepted
(``train-images-idx3-ubyte`` and ``train-images.idx3-ubyte``), each with or without ``.gz``. A
file that is missing, truncated, of the wrong kind, or whose labels do not match its images is an
error naming the file. Images come as float32 in [0, 1], ``[n, 1, 28, 28]``; labels as int64.
"""

from __future__ import annotations

import gzip
import math
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO, cast

import numpy as np

from .uci import check_name, default_data_dir

__all__ = ["IMAGE_SETS", "ImageData", "find_idx", "load_images", "read_idx"]

IMAGE_SETS = ("mnist", "fashion-mnist", "notmnist")
_UBYTE = 0x08
MAX_VALUES = 1 << 31  # 2 GiB of pixels: ten times all of MNIST's training images and more
IMAGE_SIZE = (28, 28)  # what the models and the docs expect


def find_idx(folder: Path, stem: str, kind: str) -> Path:
    """The file of ``stem`` (``train-images``) and ``kind`` (``idx3``) in ``folder``, in any of
    the four spellings; a ``FileNotFoundError`` listing them if there is none."""
    names = [f"{stem}{sep}{kind}-ubyte{gz}" for sep in ("-", ".") for gz in (".gz", "")]
    for name in names:
        if (folder / name).is_file():
            return folder / name
    raise FileNotFoundError(f"{folder}: no {stem} file (looked for {', '.join(names)})")


def _open(path: Path) -> IO[bytes]:
    """``path`` for reading, through a streaming gzip reader where it is gzip: nothing is
    decompressed beyond what is read."""
    handle = open(path, "rb")  # returned open; the caller closes it
    if handle.read(2) == b"\x1f\x8b":
        handle.close()
        return cast(IO[bytes], gzip.open(path, "rb"))
    handle.seek(0)
    return handle


def _read(handle: IO[bytes], count: int, path: Path) -> bytes:
    try:
        return handle.read(count)
    except (OSError, EOFError, zlib.error) as error:  # a bad or truncated gzip stream
        raise ValueError(f"{path}: not a readable (gzip) idx file ({error})") from None


def read_idx(path: str | Path, dims: int, max_values: int = MAX_VALUES) -> np.ndarray:
    """The unsigned-byte array of ``dims`` dimensions stored in idx file ``path``. The header is
    checked first: a claimed size above ``max_values``, or one the file does not hold exactly,
    is an error naming the file, and no more than the claimed size (plus one byte) is ever read
    or decompressed."""
    path = Path(path)
    try:
        handle = _open(path)
    except OSError as error:
        raise ValueError(f"{path}: cannot be read ({error})") from None
    with handle:
        header = _read(handle, 4 + 4 * dims, path)
        if len(header) < 4 + 4 * dims:
            raise ValueError(f"{path}: {len(header)} bytes, too short for an idx header of {dims} dims")
        zero, code, ndim = struct.unpack(">HBB", header[:4])
        if zero != 0 or code != _UBYTE or ndim != dims:
            magic = int.from_bytes(header[:4], "big")
            raise ValueError(
                f"{path}: magic number {magic:#010x} is not that of an unsigned-byte idx file of {dims} "
                f"dims ({0x0800 + dims:#010x})"
            )
        shape = struct.unpack(f">{dims}I", header[4:])
        size = math.prod(shape)  # Python ints: no overflow
        if size > max_values:
            raise ValueError(
                f"{path}: header claims {shape} = {size} values, more than the {max_values} allowed"
            )
        body = _read(handle, size, path)
        extra = _read(handle, 1, path)
    if len(body) != size or extra:
        held = f"{len(body)}" if len(body) < size else "more"
        raise ValueError(f"{path}: header says {shape} = {size} values, the file holds {held}")
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
            + (
                f"fetch the files: `pyro-dropout download {name} --data-dir DIR` "
                f"(or pyro_dropout.datasets.download_images('{name}', DIR))"
                if name in ("mnist", "fashion-mnist")
                else "put the idx files there (notMNIST has no public source in idx form)"
            )
        )
    prefix = "train" if part == "train" else "t10k"
    images_path, labels_path = (
        find_idx(folder, f"{prefix}-images", "idx3"),
        find_idx(folder, f"{prefix}-labels", "idx1"),
    )
    images, labels = read_idx(images_path, 3), read_idx(labels_path, 1)
    if len(images) != len(labels):
        raise ValueError(f"{labels_path}: {len(labels)} labels for the {len(images)} images of {images_path}")
    if images.shape[1:] != IMAGE_SIZE:
        raise ValueError(
            f"{images_path}: images of {images.shape[1]}x{images.shape[2]} pixels; {name} images are "
            f"{IMAGE_SIZE[0]}x{IMAGE_SIZE[1]}"
        )
    if labels.size and int(labels.max()) > 9:
        raise ValueError(f"{labels_path}: label {int(labels.max())} is not a class 0-9")
    x = (images.astype(np.float32) / 255.0)[:, None]
    return ImageData(name, x, labels.astype(np.int64))
