r"""The UCI protocol's settings: those every method shares (:class:`Settings`, the one source of
their defaults and of the command line's flags) and the published per-data-set ones
(:class:`PublishedSetup`: ``n_hidden.txt``, ``n_epochs.txt``, ``dropout_rates.txt``,
``tau_values.txt``). Each method's own options live with the method."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

from pyro_dropout.datasets import Dataset, read_scalar

from ..core.command import check_device
from ..core.options import unflatten, validate

__all__ = ["CHECKED_SETTINGS", "LEGACY_SETTINGS", "PublishedSetup", "Settings", "UCIBenchmark"]

# what runs made before a setting existed did: a result file without the key ran so
LEGACY_SETTINGS: dict[str, Any] = {
    "per_example_masks": False,
    "concrete_tau_init": None,
    "concrete_tau": "map",
    "concrete_m_step_rows": "training",
    "concrete_tau_grid": [],
    "tau_values": [],
}


def _help(text: str, **more: Any) -> dict[str, Any]:
    return {"help": text, **more}


@dataclass
class Settings:
    """The protocol's settings shared by every method; the defaults are the published ones."""

    epochs_multiplier: int = field(default=100, metadata=_help("epochs = n_epochs.txt x this", minimum=1))
    batch_size: int = field(default=128, metadata=_help("minibatch size", minimum=1))
    lr: float = field(default=1e-3, metadata=_help("Adam's learning rate", positive=True))
    length_scale: float = field(
        default=1e-2, metadata=_help("prior length-scale l of the networks", positive=True)
    )
    init: str = field(
        default="fan-in",
        metadata=_help(
            "initial weight means: torch.nn's U(+-1/sqrt(fan-in)) or Keras' Glorot uniform",
            choices=("fan-in", "glorot"),
        ),
    )
    hidden_layers: int = field(
        default=1,
        metadata=_help(
            "hidden layers of n_hidden.txt units: 1, the published protocol; 2 is paper 001's "
            "UCI network (results labelled METHOD-2-layers)",
            minimum=1,
        ),
    )
    tau_values: tuple[float, ...] = field(
        default=(),
        metadata=_help(
            "the precisions (original y scale) the grid methods try on the validation rows; empty: "
            "the data set's tau_values.txt, the published grid (results labelled METHOD-own-tau-grid)",
            positive=True,
        ),
    )
    num_samples: int = field(default=10_000, metadata=_help("T at test time", minimum=1))
    validation_samples: int = field(default=1_000, metadata=_help("T for the grid search", minimum=1))
    chunk_size: int = field(default=100, metadata=_help("prediction draws per chunk, at most", minimum=1))
    chunk_memory_mb: float = field(
        default=1024.0, metadata=_help("memory of a chunk of draws", positive=True)
    )
    # on the CPU, a stage's splits train in groups whose largest training activation (runs x
    # particles x batch x width) fits in this: beyond the cache a step is bound by memory traffic
    # (benchmarks/run_chunks.py). None: every split of a stage in one model, as on a GPU
    step_memory_mb: float | None = field(
        default=12.0, metadata=_help("training activations of one group of splits (CPU)", positive=True)
    )
    # what the test rows score: the chosen grid point retrained on the whole training split (True),
    # or the grid network that validation chose, trained on 80% of the rows (the published code)
    retrain: bool = field(default=True, metadata={"flag": False})
    # training masks of the dropout methods: one per example (the published code) or one per draw
    per_example_masks: bool = field(default=True, metadata={"flag": False})
    seed: int = field(default=0, metadata=_help("random seed", minimum=0))
    device: str = field(default="cpu", metadata=_help("cpu or cuda", parse_check=check_device))
    progress: bool = field(default=True, metadata={"flag": False})

    def __post_init__(self) -> None:
        validate(self)

    @classmethod
    def from_stored(cls, stored: dict[str, Any]) -> Settings:
        """The settings a result file records (its ``settings``); keys it lacks take the values
        of runs made before the setting existed (``LEGACY_SETTINGS``), else the default."""
        return unflatten(cls, stored, legacy=LEGACY_SETTINGS)


# the settings that lay the work out, not what is estimated: a run may be resumed with others
LAYOUT_SETTINGS = ("progress", "device", "chunk_size", "chunk_memory_mb", "step_memory_mb")
# the shared settings a kept result must have been made with (with all of its method's options)
CHECKED_SETTINGS = tuple(f.name for f in fields(Settings) if f.name not in LAYOUT_SETTINGS)


@dataclass
class PublishedSetup:
    """A data set's published protocol settings, read from the files beside its data."""

    n_hidden: int
    n_epochs: int
    dropout_rates: list[float]
    tau_values: list[float]

    @classmethod
    def read(cls, folder: Path) -> PublishedSetup:
        def values(name: str) -> list[float]:
            path = folder / name
            if not path.is_file():
                raise FileNotFoundError(f"{path}: no such file (the protocol's settings)")
            out = [float(v) for v in np.atleast_1d(np.loadtxt(path, ndmin=1))]
            bad = [v for v in out if not np.isfinite(v) or v < 0]
            if not out or bad:
                raise ValueError(f"{path}: expected non-negative numbers, found {bad or 'none'}")
            return out

        rates = values("dropout_rates.txt")
        if any(p >= 1 for p in rates):
            raise ValueError(
                f"{folder / 'dropout_rates.txt'}: a drop probability must be below 1, got {rates}"
            )
        taus = values("tau_values.txt")
        if any(t <= 0 for t in taus):
            raise ValueError(f"{folder / 'tau_values.txt'}: a precision must be positive, got {taus}")
        return cls(
            n_hidden=int(read_scalar(folder / "n_hidden.txt", int, minimum=1)),
            n_epochs=int(read_scalar(folder / "n_epochs.txt", int, minimum=1)),
            dropout_rates=rates,
            tau_values=taus,
        )


@dataclass
class UCIBenchmark:
    """A data set and its published protocol settings: what the UCI protocol runs on."""

    data: Dataset
    setup: PublishedSetup

    @classmethod
    def load(cls, name: str, data_dir: str | Path | None = None) -> UCIBenchmark:
        from pyro_dropout.datasets import load_uci

        data = load_uci(name, data_dir)
        return cls(data, PublishedSetup.read(data.files["folder"]))

    # the data set's and the setup's fields, read through
    name = property(lambda self: self.data.name)
    x = property(lambda self: self.data.x)
    y = property(lambda self: self.data.y)
    splits = property(lambda self: self.data.splits)
    n_splits = property(lambda self: self.data.n_splits)
    n_hidden = property(lambda self: self.setup.n_hidden)
    n_epochs = property(lambda self: self.setup.n_epochs)
    dropout_rates = property(lambda self: self.setup.dropout_rates)
    tau_values = property(lambda self: self.setup.tau_values)
