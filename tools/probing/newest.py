"""The newest surfaces (reliability round 3): the front door ``MCDropout``, conformal intervals and
sets, K-fold and LOO, ``CompiledSVI``'s optimizer settings, saved states, and the files the
library reads or writes. A probe that would hang (draws no memory can hold) must end in an error."""

from __future__ import annotations

import math
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyro
import torch
from torch import nn

from pyro_dropout import CompiledSVI, DropoutELBO, MCDropout
from pyro_dropout.datasets import write_uci_folder
from pyro_dropout.export import kfold
from pyro_dropout.infer import JointOptim, load_param_store
from pyro_dropout.metrics import conformal_interval, conformal_quantile, conformal_set
from pyro_dropout.nn import MLP

from .base import Probe, finite, fitted, small_data

NAN = float("nan")


def _net() -> nn.Module:
    return nn.Sequential(nn.Linear(3, 4), nn.Dropout(0.2), nn.Linear(4, 1))


def _front(call: Callable[[MCDropout], Any]) -> Callable[[], Any]:
    return lambda: call(MCDropout(_net(), "regression", tau=10.0, num_samples=4))


def _history_ok(history: Any) -> bool:
    return isinstance(history, list) and len(history) >= 1 and all(math.isfinite(h) for h in history)


def front_probes() -> list[Probe]:
    x, y = small_data()
    batches = [(x[:3], y[:3]), (x[3:], y[3:])]
    x_nan = x.clone()
    x_nan[1, 1] = NAN
    return [
        Probe("front", "fit on an empty list", _front(lambda b: b.fit([], num_data=6)), ("no batch",)),
        Probe(
            "front", "fit on a generator, size unknown", _front(lambda b: b.fit(iter(batches))), ("num_data",)
        ),
        Probe(
            "front",
            "fit on a generator for 2 epochs",
            _front(lambda b: b.fit(iter(batches), epochs=2, num_data=6)),
            ("epoch 2", "no batch"),
        ),
        Probe("front", "fit epochs=-1", _front(lambda b: b.fit(batches, epochs=-1)), ("epochs",)),
        Probe("front", "fit epochs=True", _front(lambda b: b.fit(batches, epochs=True)), ("epochs",)),
        Probe("front", "fit lr=nan", _front(lambda b: b.fit(batches, lr=NAN)), ("lr",)),
        Probe("front", "fit num_data=0", _front(lambda b: b.fit(batches, num_data=0)), ("num_data",)),
        Probe("front", "fit on a list", _front(lambda b: b.fit(batches)), (), _history_ok),
        Probe(
            "front",
            "predict 10**12 draws",
            _front(lambda b: b.predict(x, num_samples=10**12)),
            ("num_samples",),
        ),
        Probe("front", "predict on NaN inputs", _front(lambda b: b.predict(x_nan)), ("x holds",)),
        Probe("front", "ood of a regression model", _front(lambda b: b.ood(x, x)), ("regression",)),
        Probe(
            "front",
            "evaluate, y holds inf",
            _front(lambda b: b.evaluate(x, y.index_fill(0, torch.tensor([0]), math.inf))),
            ("y holds",),
        ),
    ]


def _probs(n: int = 8, c: int = 3, seed: int = 0) -> torch.Tensor:
    return torch.rand(n, c, generator=torch.Generator().manual_seed(seed)).softmax(-1)


def _set_ok(sets: Any) -> bool:
    return isinstance(sets, torch.Tensor) and sets.dtype == torch.bool and bool(sets.any(-1).all())


def conformal_probes() -> list[Probe]:
    mean, sd, y = torch.zeros(8), torch.ones(8), torch.randn(8)
    nan = y.clone()
    nan[3] = NAN
    p, labels = _probs(), torch.arange(8) % 3
    logits = torch.randn(8, 3, generator=torch.Generator().manual_seed(1)) * 3
    cases: list[tuple[str, Callable[[], Any], tuple[str, ...]]] = [
        (
            "interval, NaN targets",
            lambda: conformal_interval((mean, sd), nan, (mean, sd)),
            ("y_calibration",),
        ),
        ("interval, NaN means", lambda: conformal_interval((nan, sd), y, (mean, sd)), ("mean",)),
        ("interval, NaN sds", lambda: conformal_interval((mean, nan.abs()), y, (mean, sd)), ("sd",)),
        ("interval, negative sds", lambda: conformal_interval((mean, -sd), y, (mean, sd)), ("sd must be",)),
        ("interval, zero sds", lambda: conformal_interval((mean, 0 * sd), y, (mean, sd)), ("sd must be",)),
        (
            "interval, negative test sds",
            lambda: conformal_interval((mean, sd), y, (mean, -sd)),
            ("sd must be",),
        ),
        (
            "interval, targets of another length",
            lambda: conformal_interval((mean, sd), y[:3], (mean, sd)),
            ("targets",),
        ),
        ("quantile with a NaN score", lambda: conformal_quantile(nan, 0.5), ("NaN",)),
        (
            "set, label 1.7",
            lambda: conformal_set(p, labels.float().index_fill(0, torch.tensor([1]), 1.7), p),
            ("labels",),
        ),
        (
            "set, NaN probabilities",
            lambda: conformal_set(p.index_fill(0, torch.tensor([0]), NAN), labels, p),
            ("NaN",),
        ),
        ("set, 3 classes against 5", lambda: conformal_set(p, labels, _probs(4, 5)), ("classes",)),
        ("set, logits for probabilities", lambda: conformal_set(logits, labels, p), ("logits",)),
        ("set, RAPS lam=-1", lambda: conformal_set(p, labels, p, method="raps", lam=-1.0), ("lam",)),
        ("set, RAPS lam=nan", lambda: conformal_set(p, labels, p, method="raps", lam=NAN), ("lam",)),
        ("set, RAPS k_reg=-5", lambda: conformal_set(p, labels, p, method="raps", k_reg=-5), ("k_reg",)),
        ("set, no calibration points", lambda: conformal_set(p[:0], labels[:0], p), ("calibration points",)),
    ]
    probes = [Probe("conformal", what, call, names) for what, call, names in cases]
    probes.append(
        Probe("conformal", "set, good input", lambda: conformal_set(p, labels, p, alpha=0.2), (), _set_ok)
    )
    return probes


def _kfold(**kwargs: Any) -> Callable[[], Any]:
    x, y = small_data(9, 1)
    x, y = kwargs.pop("x", x), kwargs.pop("y", y)
    settings = {"k": 3, "steps": 2, "num_samples": 4, **kwargs}
    return lambda: kfold(lambda: MLP(1, hidden=(4,)), x, y, **settings)


def kfold_probes() -> list[Probe]:
    x, _ = small_data(9, 1)
    x_nan = x.clone()
    x_nan[0, 0] = NAN
    return [
        Probe("kfold", "lr=-1", _kfold(lr=-1.0), ("lr",)),
        Probe("kfold", "lr=nan", _kfold(lr=NAN), ("lr",)),
        Probe("kfold", "loss=DropoutELBO (the class)", _kfold(loss=DropoutELBO), ("loss",)),
        Probe("kfold", "steps=0", _kfold(steps=0), ("steps",)),
        Probe("kfold", "x holds NaN", _kfold(x=x_nan), ("x holds",)),
        Probe("kfold", "k=1", _kfold(k=1), ("k must be",)),
    ]


def _compiled(settings: dict[str, Any]) -> Callable[[], Any]:
    def call() -> Any:
        model, guide = fitted()
        optim = pyro.optim.Adam(settings)
        return CompiledSVI(model, guide, optim, DropoutELBO()).step(*small_data())

    return call


def _scheduler() -> Any:
    model, guide = fitted()
    sched = pyro.optim.ExponentialLR(
        {"optimizer": torch.optim.Adam, "optim_args": {"lr": 0.01}, "gamma": 0.5}
    )
    return CompiledSVI(model, guide, sched, DropoutELBO())


def optimizer_probes() -> list[Probe]:
    return [
        Probe("optimizer", "CompiledSVI with a scheduler", _scheduler, ("scheduler",)),
        Probe("optimizer", "CompiledSVI lr=-1", _compiled({"lr": -1.0}), ("lr",)),
        Probe("optimizer", "CompiledSVI lr=nan", _compiled({"lr": NAN}), ("lr",)),
        Probe(
            "optimizer",
            "CompiledSVI misspelt key",
            _compiled({"lr": 0.01, "betass": (0.9, 0.99)}),
            ("betass",),
        ),
        Probe("optimizer", "CompiledSVI good settings", _compiled({"lr": 0.01}), (), finite),
    ]


class _RunsCode:
    """A crafted pickle: loading it would create the file ``marker``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple:
        return (Path.touch, (self.marker,))


def _crafted_load(load: Callable[[Path], Any]) -> tuple[Callable[[], Any], Callable[[], bool]]:
    folder = Path(tempfile.mkdtemp(prefix="probe-load-"))
    marker, path = folder / "ran", folder / "state.pt"
    torch.save({"params": {}, "constraints": {}, "x": _RunsCode(marker)}, path)
    return (lambda: load(path)), (lambda: not marker.exists())


def _write_outside() -> tuple[Callable[[], Any], Callable[[], bool]]:
    root = Path(tempfile.mkdtemp(prefix="probe-root-")) / "root"
    outside = root.parent / "escaped"
    call = lambda: write_uci_folder(root, "../escaped", np.zeros((6, 2)), np.zeros(6))  # noqa: E731
    return call, lambda: not outside.exists()


def file_probes() -> list[Probe]:
    store_call, store_safe = _crafted_load(load_param_store)
    optim_call, optim_safe = _crafted_load(lambda p: JointOptim(torch.optim.Adam, {"lr": 0.1}).load(str(p)))
    write_call, write_safe = _write_outside()
    return [
        Probe("files", "load_param_store of a crafted pickle", store_call, ("state.pt",), safe=store_safe),
        Probe("files", "JointOptim.load of a crafted pickle", optim_call, ("state.pt",), safe=optim_safe),
        Probe("files", "write_uci_folder('../escaped')", write_call, ("plain folder name",), safe=write_safe),
    ]


def newest_probes() -> list[Probe]:
    return front_probes() + conformal_probes() + kfold_probes() + optimizer_probes() + file_probes()
