"""MNIST with a validation split taken from its training set (fixed by a seed), and the
out-of-distribution sets (Fashion-MNIST and notMNIST test images) as tensors."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from pyro_dropout.datasets import load_images

__all__ = ["OOD_SETS", "ImageSplits", "default_device_tensor", "load_splits"]

OOD_SETS = ("fashion-mnist", "notmnist")


@dataclass
class ImageSplits:
    """Tensors ``(x, y)`` of the train, validation and test parts, and ``ood``: images of other sets."""

    train: tuple[torch.Tensor, torch.Tensor]
    val: tuple[torch.Tensor, torch.Tensor]
    test: tuple[torch.Tensor, torch.Tensor]
    ood: dict[str, torch.Tensor] = field(default_factory=dict)


def default_device_tensor(a: np.ndarray) -> torch.Tensor:
    """``a`` on PyTorch's default device (the command's ``--device``)."""
    return torch.from_numpy(np.ascontiguousarray(a)).to(torch.get_default_device())


def _tensors(x: np.ndarray, y: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    return default_device_tensor(x), default_device_tensor(y)


def load_splits(
    data_dir: str | Path | None = None,
    *,
    validation: int = 5000,
    train_size: int | None = None,
    test_size: int | None = None,
    ood: tuple[str, ...] = (),
    seed: int = 0,
) -> ImageSplits:
    """MNIST: ``validation`` training images held out (a permutation fixed by ``seed``), the
    first ``train_size`` of the rest for training, and the first ``test_size`` test images (and
    as many of each ``ood`` set); ``None``: all. The tensors are on PyTorch's default device."""
    train, test = load_images("mnist", "train", data_dir), load_images("mnist", "test", data_dir)
    if not 0 < validation < len(train):
        raise ValueError(f"--validation must be between 1 and {len(train) - 1} images, got {validation}")
    available = len(train) - validation
    if train_size is not None and train_size > available:
        raise ValueError(
            f"--train-size {train_size} is more than the {available} training images left after "
            f"--validation {validation}"
        )
    if test_size is not None and test_size > len(test):
        raise ValueError(f"--test-size {test_size} is more than the {len(test)} test images")
    order = np.random.default_rng(seed).permutation(len(train))
    val_rows, train_rows = order[:validation], order[validation:][:train_size]
    n_test = test_size or len(test)
    return ImageSplits(
        train=_tensors(train.x[train_rows], train.y[train_rows]),
        val=_tensors(train.x[val_rows], train.y[val_rows]),
        test=_tensors(test.x[:n_test], test.y[:n_test]),
        ood={name: default_device_tensor(load_images(name, "test", data_dir).x[:n_test]) for name in ood},
    )
