"""A tiny data folder of MNIST-format image sets (random images, real idx files) for the tests."""

import gzip
import struct

import numpy as np


def _idx(values, dims):
    header = struct.pack(">HBB", 0, 0x08, dims) + struct.pack(f">{dims}I", *values.shape)
    return gzip.compress(header + values.astype(np.uint8).tobytes())


def write_tiny_images(root, train=300, test=60, seed=0):
    """``root/{mnist,fashion-mnist,notmnist}`` with ``train`` / ``test`` images; an MNIST image
    of class k is brighter in row band k, so that a few steps of training learn something."""
    g = np.random.default_rng(seed)
    for name in ("mnist", "fashion-mnist", "notmnist"):
        folder = root / name
        folder.mkdir(parents=True)
        for prefix, n in (("train", train), ("t10k", test)):
            if name == "notmnist" and prefix == "train":
                continue
            y = g.integers(0, 10, n)
            x = g.integers(0, 60, (n, 28, 28))
            if name == "mnist":
                for i, k in enumerate(y):
                    x[i, 2 + 2 * k : 4 + 2 * k, 4:24] = 255
            (folder / f"{prefix}-images-idx3-ubyte.gz").write_bytes(_idx(x, 3))
            (folder / f"{prefix}-labels-idx1-ubyte.gz").write_bytes(_idx(y, 1))
    return root
