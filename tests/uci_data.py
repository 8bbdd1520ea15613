"""A tiny synthetic UCI data set in the standard layout, for the protocol's tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pyro_dropout_experiments.uci import Method, Settings, get_method, method_class

# the protocol's settings scaled down so that a test runs in seconds
TINY = Settings(epochs_multiplier=1, num_samples=40, validation_samples=20, chunk_size=16, progress=False)
# the methods' own options scaled down the same way
TINY_OPTIONS: dict[str, dict] = {
    "sgp": {"steps": 30, "inducing": 10},
    "hmc": {"warmup": 10, "samples": 10, "max_tree_depth": 3},
}


def tiny_method(name: str, **options: object) -> Method:
    """The registered method ``name`` with its options scaled down (and ``options`` set)."""
    cls, _ = method_class(name)
    return get_method(name, cls.options_class(**{**TINY_OPTIONS.get(name, {}), **options}))


def write_tiny_uci(root: Path, name: str = "tiny") -> Path:
    """60 rows: 3 informative features, 1 constant column, target last; 3 splits of 50/10 rows.

    Returns ``root``, the folder that holds ``uci/<name>/data/``.
    """
    g = np.random.default_rng(0)
    x = g.normal(size=(60, 3))
    data = np.column_stack([x, np.full(60, 7.0), 10 + 5 * x[:, 0] - x[:, 1] + g.normal(scale=0.5, size=60)])
    folder = root / "uci" / name / "data"
    folder.mkdir(parents=True)
    np.savetxt(folder / "data.txt", data)
    np.savetxt(folder / "index_features.txt", [0, 1, 2, 3], fmt="%d")
    np.savetxt(folder / "index_target.txt", [4], fmt="%d")
    for i in range(3):
        order = g.permutation(60)
        np.savetxt(folder / f"index_train_{i}.txt", order[:50], fmt="%d")
        np.savetxt(folder / f"index_test_{i}.txt", order[50:], fmt="%d")
    for setting, values in [
        ("n_splits", [3]),
        ("n_hidden", [8]),
        ("n_epochs", [2]),
        ("dropout_rates", [0.01, 0.1]),
        ("tau_values", [0.5, 2.0]),
    ]:
        np.savetxt(folder / f"{setting}.txt", values)
    return root


def spy_on_build(monkeypatch, part: str) -> list:
    """A list that collects ``part`` (``"model"``, ``"guide"`` or ``"loss"``) of every vectorised
    model the UCI protocol builds."""
    from pyro_dropout_experiments.uci import runs

    seen: list = []
    original = runs.build_runs

    def spy(*args, **kwargs):
        built = original(*args, **kwargs)
        seen.append(getattr(built, part))
        return built

    monkeypatch.setattr(runs, "build_runs", spy)
    return seen


def stop_training_when(monkeypatch, stop) -> list:
    """Record each ``train_and_score`` call of the protocol as ``(desc, splits, runs)`` and raise
    KeyboardInterrupt (a stopped run) at the first call for which ``stop(calls)`` holds."""
    from pyro_dropout_experiments.uci import protocol

    original = protocol.train_and_score
    calls: list = []

    def train(bench, method, specs, s, num_samples, desc, **kw):
        calls.append((desc, sorted({sp.split for sp in specs}), len(specs)))
        if stop(calls):
            raise KeyboardInterrupt
        return original(bench, method, specs, s, num_samples, desc, **kw)

    monkeypatch.setattr(protocol, "train_and_score", train)
    return calls
