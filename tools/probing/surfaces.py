"""The surfaces added since the first wave: recurrent layers, attacks, policies, SVIModule,
evaluate's labels, the ArviZ export and image files."""

from __future__ import annotations

import gzip
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyro
import torch
from pyro.infer.autoguide import AutoNormal

from pyro_dropout import DropoutELBO, DropoutGuide, evaluate
from pyro_dropout.attacks import fgs, iterative_fgs
from pyro_dropout.datasets.images import load_images, read_idx
from pyro_dropout.export import from_samples
from pyro_dropout.nn import GRU, LSTM, MLP
from pyro_dropout.policies import EpsilonGreedy, ThompsonSampling

from .base import Probe, finite, idx_header, small_data


def _recurrent(layer: type, x: Any, state: Any = None, **kwargs: Any) -> torch.Tensor:
    pyro.clear_param_store()
    net = layer(3, 4, **kwargs)
    return net(x, state)[0]


def recurrent_probes() -> list[Probe]:
    x = torch.randn(5, 2, 3)  # [T, N, in]
    packed = torch.nn.utils.rnn.pack_padded_sequence(x, [5, 3])
    two = (torch.zeros(2, 2, 4), torch.zeros(2, 2, 4))
    cases: list[tuple[str, Callable[[], Any], tuple[str, ...]]] = [
        ("LSTM PackedSequence", lambda: _recurrent(LSTM, packed), ("PackedSequence",)),
        ("LSTM zero steps", lambda: _recurrent(LSTM, x[:0]), ("time steps",)),
        ("GRU zero sequences", lambda: _recurrent(GRU, x[:, :0]), ("sequences",)),
        ("LSTM 7 features for 3", lambda: _recurrent(LSTM, torch.randn(5, 2, 7)), ("inputs",)),
        ("LSTM a 2-layer (h, c) for 1 layer", lambda: _recurrent(LSTM, x, two), ("state h",)),
        ("LSTM state (h,) only", lambda: _recurrent(LSTM, x, two[:1]), ("state",)),
        ("LSTM state a list of numbers", lambda: _recurrent(LSTM, x, [1, 2]), ("state",)),
        ("LSTM input a NumPy array", lambda: _recurrent(LSTM, x.numpy()), ("x must be a tensor",)),
        ("GRU h0 as a bare tensor (torch's way)", lambda: _recurrent(GRU, x, torch.zeros(1, 2, 4)), ()),
        ("LSTM num_layers=0", lambda: _recurrent(LSTM, x, num_layers=0), ("num_layers",)),
    ]
    return [Probe("recurrent", what, call, names, finite) for what, call, names in cases]


def _classifier() -> tuple[MLP, DropoutGuide]:
    pyro.clear_param_store()
    model = MLP(4, hidden=(8,), out_features=3, likelihood="categorical")
    guide = DropoutGuide(model, dropout=0.2)
    guide(torch.rand(2, 4), torch.tensor([0, 1]))
    return model, guide


def _attack(**kwargs: Any) -> torch.Tensor:
    model, guide = _classifier()
    x = kwargs.pop("x", torch.rand(5, 4))
    return fgs(model, guide, x, **({"eta": 0.1} | kwargs))


def attack_probes() -> list[Probe]:
    nan = torch.rand(5, 4)
    nan[0, 0] = float("nan")
    cases: list[tuple[str, Callable[[], Any], tuple[str, ...]]] = [
        ("fgs target=True", lambda: _attack(target=True), ("target",)),
        ("fgs target='cat'", lambda: _attack(target="cat"), ("target",)),
        ("fgs target=3 of 3 classes", lambda: _attack(target=3), ("target",)),
        ("fgs target=-1", lambda: _attack(target=-1), ("target",)),
        ("fgs target of the wrong length", lambda: _attack(target=torch.tensor([0, 1])), ("target",)),
        ("fgs target floats", lambda: _attack(target=torch.zeros(5)), ("target",)),
        ("fgs eta=-0.1", lambda: _attack(eta=-0.1), ("eta",)),
        ("fgs eta=nan", lambda: _attack(eta=float("nan")), ("eta",)),
        ("fgs bounds=(1, 0)", lambda: _attack(bounds=(1.0, 0.0)), ("bounds",)),
        ("fgs bounds=(0, inf)", lambda: _attack(bounds=(0.0, float("inf"))), ("bounds",)),
        ("fgs bounds=(0,)", lambda: _attack(bounds=(0.0,)), ("bounds",)),
        ("fgs x outside bounds", lambda: _attack(x=torch.rand(5, 4) * 255), ("bounds",)),
        ("fgs x with NaN", lambda: _attack(x=nan), ("NaN",)),
        ("fgs x integers", lambda: _attack(x=torch.ones(5, 4, dtype=torch.long)), ("floating-point",)),
        ("fgs x empty", lambda: _attack(x=torch.rand(0, 4)), ("at least one",)),
        ("fgs site='nope'", lambda: _attack(site="nope"), ("nope",)),
        ("fgs num_samples=0", lambda: _attack(num_samples=0), ("num_samples",)),
        ("fgs bounds=None", lambda: _attack(bounds=None), ()),
        ("fgs bounds=1.0", lambda: _attack(bounds=1.0), ("bounds",)),
        ("fgs target='1'", lambda: _attack(target="1"), ("target",)),
        (
            "iterative_fgs steps=0",
            lambda: list(iterative_fgs(*_classifier(), torch.rand(5, 4), target=0, steps=0)),
            ("steps",),
        ),
    ]
    return [Probe("attacks", what, call, names, finite) for what, call, names in cases]


def _policy(kind: type, values: Callable | None = None, x: Any = None, **kwargs: Any) -> torch.Tensor:
    model, guide = _classifier()
    policy = kind(model, guide, values=values or (lambda c: c[:, :3]), **kwargs)
    return policy.act(torch.rand(5, 4) if x is None else x)


def _untrained(kind: type) -> torch.Tensor:
    pyro.clear_param_store()
    model = MLP(4, hidden=(8,), out_features=3, likelihood="categorical")
    guide = AutoNormal(model)  # never called: it holds no weights
    return kind(model, guide, values=lambda c: c[:, :3]).act(torch.rand(5, 4))


def policy_probes() -> list[Probe]:
    cases: list[tuple[str, Callable[[], Any], tuple[str, ...]]] = []
    for kind in (ThompsonSampling, EpsilonGreedy):
        name = kind.__name__
        cases += [
            (f"{name} untrained AutoNormal", lambda k=kind: _untrained(k), ("never been called",)),
            (f"{name} scores [N]", lambda k=kind: _policy(k, lambda c: c[:, 0]), ("[N, actions]",)),
            (f"{name} scores of 0 actions", lambda k=kind: _policy(k, lambda c: c[:, :0]), ("0 actions",)),
            (f"{name} NaN scores", lambda k=kind: _policy(k, lambda c: c * float("nan")), ("NaN",)),
            (f"{name} scores for other rows", lambda k=kind: _policy(k, lambda c: c[:2]), ("[N, actions]",)),
            (f"{name} contexts [N] only", lambda k=kind: _policy(k, x=torch.rand(5)), ("contexts",)),
            (f"{name} no values", lambda k=kind: k(*_classifier()), ("values",)),
        ]
    cases += [
        ("EpsilonGreedy epsilon=True", lambda: _policy(EpsilonGreedy, epsilon=True), ("epsilon",)),
        ("EpsilonGreedy epsilon=1.5", lambda: _policy(EpsilonGreedy, epsilon=1.5), ("epsilon",)),
        ("EpsilonGreedy seed=-1", lambda: _policy(EpsilonGreedy, seed=-1), ("seed",)),
        ("EpsilonGreedy seed=0.5", lambda: _policy(EpsilonGreedy, seed=0.5), ("seed",)),
        ("EpsilonGreedy seed='a'", lambda: _policy(EpsilonGreedy, seed="a"), ("seed",)),
        (
            "EpsilonGreedy epsilon=0, NaN scores",
            lambda: _policy(EpsilonGreedy, lambda c: c * float("nan"), epsilon=0),
            ("NaN",),
        ),
        ("ThompsonSampling per='batch'", lambda: _policy(ThompsonSampling, per="batch"), ("per",)),
    ]
    return [Probe("policies", what, call, names, finite) for what, call, names in cases]


def _evaluate_labels(y: Any) -> float:
    model, guide = _classifier()
    return evaluate(
        model, guide, torch.rand(len(y) if hasattr(y, "__len__") else 4, 4), y, num_samples=5
    ).accuracy


def _evaluate_regression(y: Any, x: Any = None) -> float:
    pyro.clear_param_store()
    model = MLP(3, hidden=(4,))
    guide = DropoutGuide(model, dropout=0.2)
    x = small_data()[0] if x is None else x
    guide(*small_data())
    return evaluate(model, guide, x, y, num_samples=5).rmse


def label_probes() -> list[Probe]:
    one_hot = torch.nn.functional.one_hot(torch.tensor([0, 1, 2, 1]), 3).float()
    cases: list[tuple[str, Callable[[], Any], tuple[str, ...]]] = [
        ("labels one-hot", lambda: _evaluate_labels(one_hot), ("one-hot", "argmax")),
        ("labels [N, 1]", lambda: _evaluate_labels(torch.tensor([[0], [1], [2], [1]])), ("squeeze",)),
        ("labels 1.5", lambda: _evaluate_labels(torch.tensor([0.0, 1.5, 2.0, 1.0])), ("obs",)),
        ("labels 3 of 3 classes", lambda: _evaluate_labels(torch.tensor([0, 1, 3, 1])), ("obs",)),
        ("labels -1", lambda: _evaluate_labels(torch.tensor([0, -1, 2, 1])), ("obs",)),
        ("labels int32", lambda: _evaluate_labels(torch.tensor([0, 1, 2, 1], dtype=torch.int32)), ()),
        ("labels bool", lambda: _evaluate_labels(torch.tensor([False, True, True, False])), ()),
        ("labels a NumPy array", lambda: _evaluate_labels(np.array([0, 1, 2, 1])), ("argument",)),
        ("labels a list", lambda: _evaluate_labels([0, 1, 2, 1]), ("argument",)),
        ("regression y [N, 1]", lambda: _evaluate_regression(small_data()[1][:, None]), ("obs",)),
        ("regression y of 4 for 6 rows", lambda: _evaluate_regression(small_data()[1][:4]), ("y has shape",)),
    ]
    return [Probe("labels", what, call, names, finite) for what, call, names in cases]


def _export(**kwargs: Any) -> Any:
    draws = {"obs": np.zeros((6, 4))}
    return from_samples(log_likelihood=draws, posterior_predictive=draws, **kwargs)


def export_probes() -> list[Probe]:
    cases: list[tuple[str, Callable[[], Any], tuple[str, ...]]] = [
        ("chains=0", lambda: _export(chains=0), ("chains",)),
        ("chains=True", lambda: _export(chains=True), ("chains",)),
        ("chains=-2", lambda: _export(chains=-2), ("chains",)),
        ("chains=2.0", lambda: _export(chains=2.0), ("chains",)),
        ("chains=4 of 6 draws", lambda: _export(chains=4), ("chains",)),
        ("dims of the wrong length", lambda: _export(dims={"obs": ["a", "b"]}), ("dims", "obs")),
        ("dims of an unknown site", lambda: _export(dims={"nope": ["a"]}), ("nope",)),
        ("dims a string", lambda: _export(dims={"obs": "point"}), ("dims", "obs")),
        ("chains=2", lambda: _export(chains=2), ()),
    ]
    return [Probe("export", what, call, names) for what, call, names in cases]


def _idx(folder: Path, name: str, shape: tuple[int, ...], body: bytes, zipped: bool = False) -> Path:
    path = folder / name
    data = idx_header(shape) + body
    path.write_bytes(gzip.compress(data) if zipped else data)
    return path


def _read_file(shape: tuple[int, ...], body: bytes, zipped: bool = False, dims: int | None = None) -> Any:
    with tempfile.TemporaryDirectory() as folder:
        path = _idx(Path(folder), "f-idx3-ubyte", shape, body, zipped)
        return read_idx(path, len(shape) if dims is None else dims)


def _images_of_size(size: int) -> Any:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder) / "mnist"
        root.mkdir()
        _idx(root, "t10k-images-idx3-ubyte", (2, size, size), bytes(2 * size * size))
        _idx(root, "t10k-labels-idx1-ubyte", (2,), bytes(2))
        return load_images("mnist", "test", data_dir=folder)


def image_probes() -> list[Probe]:
    bomb = bytes(50_000_000)  # 50 MB of zeros behind a header that claims one image
    cases: list[tuple[str, Callable[[], Any], tuple[str, ...]]] = [
        ("a gzip bomb behind a one-image header", lambda: _read_file((1, 28, 28), bomb, True), ("header",)),
        ("a header claiming 2**32-1 cubed values", lambda: _read_file((2**32 - 1,) * 3, b""), ("header",)),
        ("a truncated body", lambda: _read_file((2, 28, 28), bytes(100)), ("header",)),
        ("a 2-dim file read as 3 dims", lambda: _read_file((2, 28), bytes(56), dims=3), ("magic",)),
        ("a truncated gzip stream", lambda: _read_truncated_gzip(), ("gzip",)),
        ("16x16 images", lambda: _images_of_size(16), ("28",)),
    ]
    return [Probe("images", what, call, names) for what, call, names in cases]


def _read_truncated_gzip() -> Any:
    with tempfile.TemporaryDirectory() as folder:
        path = _idx(Path(folder), "f-idx3-ubyte", (1, 28, 28), bytes(784), zipped=True)
        path.write_bytes(path.read_bytes()[:-12])
        return read_idx(path, 3)


def _module(**kwargs: Any) -> Any:
    from pyro_dropout.lightning import SVIModule

    pyro.clear_param_store()
    model = MLP(3, hidden=(4,))
    guide = DropoutGuide(model, dropout=0.2)
    batch = kwargs.pop("batch", small_data())
    module = SVIModule(model, guide, **({"loss": DropoutELBO(), "num_data": 6} | kwargs))
    return module.training_step(batch, 0)


def lightning_probes() -> list[Probe]:
    try:
        import lightning  # noqa: F401
    except ImportError:
        return []
    cases: list[tuple[str, Callable[[], Any], tuple[str, ...]]] = [
        ("loss a class", lambda: _module(loss=DropoutELBO), ("loss",)),
        ("loss='elbo'", lambda: _module(loss="elbo"), ("loss",)),
        ("loss=MSELoss()", lambda: _module(loss=torch.nn.MSELoss()), ("loss",)),
        ("loss without differentiable_loss", lambda: _module(loss=pyro.infer.TraceMeanField_ELBO), ("loss",)),
        ("optimizer pyro.optim.Adam", lambda: _module(optimizer=pyro.optim.Adam), ("optimizer",)),
        ("num_data=0", lambda: _module(num_data=0), ("num_data",)),
        ("num_data=4 below an 6-row batch", lambda: _module(num_data=4), ("num_data",)),
        ("num_samples=0", lambda: _module(num_samples=0), ("num_samples",)),
        ("a batch of one tensor", lambda: _module(batch=small_data()[0]), ("batch",)),
    ]
    return [Probe("SVIModule", what, call, names, finite) for what, call, names in cases]


def surface_probes() -> list[Probe]:
    return (
        recurrent_probes()
        + attack_probes()
        + policy_probes()
        + label_probes()
        + export_probes()
        + image_probes()
        + lightning_probes()
    )
