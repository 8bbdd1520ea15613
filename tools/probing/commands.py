"""The ``pyro-dropout`` commands: bad flags and hostile data files (``folders.py``: results
folders and paths); each command runs through ``cli.cli``."""

from __future__ import annotations

import gzip
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .base import Probe, idx_header
from .cli import CURVE_TINY, MNIST_SMALL, MNIST_TINY, cli, refused
from .folders import path_probes, results_probes


def _idx(values: np.ndarray) -> bytes:
    return gzip.compress(idx_header(values.shape) + values.astype(np.uint8).tobytes())


def write_images(root: Path, digits: list[int], train: int = 120, test: int = 60) -> Path:
    """``root/{mnist,fashion-mnist,notmnist}``: random images of the given digits."""
    g = np.random.default_rng(0)
    for name in ("mnist", "fashion-mnist", "notmnist"):
        folder = root / name
        folder.mkdir(parents=True, exist_ok=True)
        for prefix, n in (("train", train), ("t10k", test)):
            y = g.choice(digits, n)
            x = g.integers(0, 255, (n, 28, 28))
            (folder / f"{prefix}-images-idx3-ubyte.gz").write_bytes(_idx(x))
            (folder / f"{prefix}-labels-idx1-ubyte.gz").write_bytes(_idx(y))
    return root


def write_co2(root: Path, months: int, values: np.ndarray | None = None) -> Path:
    """``root/co2/co2.csv``: ``months`` monthly readings from January 1958 (a trend, or ``values``)."""
    (root / "co2").mkdir(parents=True, exist_ok=True)
    values = 315 + 0.125 * np.arange(months) if values is None else values
    rows = [f"{1958 + i // 12}{1 + i % 12:02d}15,{values[i]:.6g}" for i in range(months)]
    (root / "co2" / "co2.csv").write_text("date,co2\n" + "\n".join(rows) + "\n")
    return root


def _in_folder(argv: list[str], prepare: Callable[[Path], list[str]] | None = None) -> int:
    with tempfile.TemporaryDirectory() as folder:
        extra = prepare(Path(folder)) if prepare else []
        return cli([*argv, *extra, "--out", str(Path(folder) / "out")])


def flag_probes() -> list[Probe]:
    cases: list[tuple[str, list[str], tuple[str, ...]]] = [
        ("demo --seed 2**80", ["demo", "--quick", "--seed", str(2**80)], ("--seed",)),
        ("demo --steps 0", ["demo", "--steps", "0"], ("--steps",)),
        ("demo --num-samples 0", ["demo", "--steps", "5", "--num-samples", "0"], ("--num-samples",)),
        ("demo --loss nope", ["demo", "--loss", "nope"], ("--loss",)),
        ("demo --device foo", ["demo", "--device", "foo"], ("--device",)),
        ("co2 --device foo", ["co2", *CURVE_TINY, "--device", "foo"], ("--device",)),
        ("co2 --steps -1", ["co2", *CURVE_TINY[:4], "--steps", "-1"], ("--steps",)),
        ("synthetic --repeats 0", ["synthetic", *CURVE_TINY, "--repeats", "0"], ("--repeats",)),
        ("synthetic --batch-size 0", ["synthetic", *CURVE_TINY, "--batch-size", "0"], ("--batch-size",)),
        ("synthetic --sizes 10,-5", ["synthetic", *CURVE_TINY, "--sizes", "10,-5"], ("--sizes",)),
        ("forecast --every 100000", ["forecast", "--steps", "5", "--every", "100000"], ("--every",)),
        ("forecast --train-end 3000", ["forecast", "--steps", "5", "--train-end", "3000"], ("--train-end",)),
        ("forecast --train-end 1900", ["forecast", "--steps", "5", "--train-end", "1900"], ("--train-end",)),
        ("forecast --window 0", ["forecast", "--steps", "5", "--window", "0"], ("--window",)),
        (
            "mnist concrete --min-steps -5",
            ["mnist", "concrete", *MNIST_SMALL, "--min-steps", "-5"],
            ("--min-steps",),
        ),
        (
            "mnist adversarial --target 10",
            ["mnist", "adversarial", *MNIST_SMALL, "--target", "10"],
            ("--target",),
        ),
        (
            "mnist adversarial --dropout 1.0",
            ["mnist", "adversarial", *MNIST_SMALL, "--dropout", "1.0"],
            ("--dropout",),
        ),
        (
            "mnist bbalpha --dropout 1.5",
            ["mnist", "bbalpha", *MNIST_SMALL, "--dropout", "1.5"],
            ("--dropout",),
        ),
        (
            "mnist bbalpha --alphas 0.5,nan",
            ["mnist", "bbalpha", *MNIST_SMALL, "--alphas", "0.5,nan"],
            ("--alphas",),
        ),
        ("mnist rotated --epochs 0", ["mnist", "rotated", *MNIST_SMALL, "--epochs", "0"], ("--epochs",)),
    ]
    return [
        Probe("command flags", what, lambda a=argv: _in_folder(a), names, refused)
        for what, argv, names in cases
    ]


def _images(digits: list[int]) -> Callable[[Path], list[str]]:
    return lambda folder: ["--data-dir", str(write_images(folder / "data", digits))]


def _co2(months: int, values: np.ndarray | None = None) -> Callable[[Path], list[str]]:
    return lambda folder: ["--data-dir", str(write_co2(folder / "data", months, values))]


def data_probes() -> list[Probe]:
    months = (2004 - 1958) * 12
    huge = 315 + 0.125 * np.arange(months)
    huge[5] = 1e300
    cases: list[tuple[str, list[str], Callable[[Path], list[str]], tuple[str, ...]]] = [
        ("mnist rotated: no digit 1", ["mnist", "rotated", *MNIST_TINY], _images([0, 2, 3]), ("digit",)),
        (
            "mnist bbalpha --train-size 5000 of 120",
            ["mnist", "bbalpha", *MNIST_TINY, "--train-size", "5000"],
            _images(list(range(10))),
            ("--train-size",),
        ),
        ("co2: no readings after 1991", ["co2", *CURVE_TINY], _co2((1990 - 1958) * 12), ("co2.csv",)),
        ("co2: three readings", ["co2", *CURVE_TINY], _co2(3), ("co2.csv",)),
        ("co2: a value of 1e300", ["co2", *CURVE_TINY], _co2(months, huge), ("co2.csv",)),
        ("forecast: three readings", ["forecast", "--steps", "5"], _co2(3), ("co2.csv", "--train-end")),
    ]
    probes = [
        Probe("command data", what, lambda a=argv, p=prep: _in_folder(a, p), names, refused)
        for what, argv, prep, names in cases
    ]
    for what, content in [("{'format': 2}", {"format": 2}), ("a list", [1, 2]), ("'garbage'", "garbage")]:
        probes.append(
            Probe(
                "command data",
                f"uci-status on a .train.pt holding {what}",
                lambda c=content: _status(c),
                (".train.pt",),
            )
        )
    return probes


def _status(content: Any) -> int:
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "out"
        out.mkdir()
        path = out / "concrete_mc-dropout_split00.train.pt"
        if isinstance(content, str):
            path.write_text(content)
        else:
            torch.save(content, path)
        return cli(["uci-status", str(out)])


def command_probes() -> list[Probe]:
    return flag_probes() + data_probes() + path_probes() + results_probes()
