"""Synthetic regression data in the UCI benchmark's folder layout, for data no default was tuned on.

The UCI protocol's defaults must hold on data sets the library has never seen. These simulate
the kinds of targets the benchmark holds, with known noise, and write them in the standard
layout (``data.txt``, index files, splits, the published-style grids) so that
``pyro-dropout uci --data-dir ROOT --dataset NAME`` runs on them unchanged.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .uci import check_name

__all__ = ["low_noise_regression", "write_uci_folder"]


def low_noise_regression(
    rows: int = 768, noise_sd: float = 0.3, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """A near-noiseless simulated target, as from a building-energy simulator: 8 features (four
    continuous, four on a few levels, one of them irrelevant), a smooth target with standard
    deviation about 7 and Gaussian noise of ``noise_sd`` (so the noise is ~4% of the target's
    spread by default). Returns ``x`` ``[rows, 8]`` and ``y`` ``[rows]``."""
    if rows < 20 or noise_sd < 0:
        raise ValueError(f"low_noise_regression: rows >= 20 and noise_sd >= 0 needed, got {rows}, {noise_sd}")
    g = np.random.default_rng(seed)
    u = g.uniform(size=(rows, 4))
    levels = np.column_stack(
        [
            g.choice([3.5, 7.0], rows),  # height: two levels
            g.choice([2, 3, 4, 5], rows),  # orientation: no effect on the target
            g.choice([0.0, 0.1, 0.25, 0.4], rows),  # glazing area
            g.integers(0, 6, rows),  # glazing distribution
        ]
    )
    x = np.column_stack([u, levels])
    compact, surface, wall, roof = u.T
    height, glazing, spread = levels[:, 0], levels[:, 2], levels[:, 3]
    f = (
        8.0
        + 14.0 / (1.0 + np.exp(-6.0 * (compact - 0.5)))
        + 2.2 * (height - 3.5) * (0.5 + surface)
        + 18.0 * glazing * (1.0 + 0.05 * spread)
        + 2.0 * np.sin(3.0 * wall)
        - 1.5 * roof**2
    )
    return x, f + noise_sd * g.normal(size=rows)


def write_uci_folder(
    root: str | Path,
    name: str,
    x: np.ndarray,
    y: np.ndarray,
    splits: int = 20,
    test_fraction: float = 0.1,
    hidden: int = 50,
    epochs: int = 40,
    dropout_rates: tuple[float, ...] = (0.005, 0.01, 0.05, 0.1),
    tau_values: tuple[float, ...] = (0.25, 0.5, 0.75),
    seed: int = 0,
) -> Path:
    """Write ``x``, ``y`` as ``root/uci/name/data/`` in the benchmark's layout, with ``splits``
    random train/test splits and the grids of the published code's files; returns the folder.
    ``name`` is a plain folder name (``../x`` is refused: nothing is written outside ``root``)."""
    check_name(name)
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float).reshape(-1)
    if x.ndim != 2 or x.shape[0] != y.shape[0]:
        raise ValueError(
            f"write_uci_folder: x [rows, features] and y [rows] needed, got {x.shape}, {y.shape}"
        )
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValueError("write_uci_folder: x and y hold NaN or infinite values")
    if not 0 < test_fraction < 1 or splits < 1:
        raise ValueError(
            f"write_uci_folder: 0 < test_fraction < 1 and splits >= 1, got {test_fraction}, {splits}"
        )
    folder = Path(root) / "uci" / name / "data"
    folder.mkdir(parents=True, exist_ok=True)
    rows, features = x.shape
    np.savetxt(folder / "data.txt", np.column_stack([x, y]))
    np.savetxt(folder / "index_features.txt", np.arange(features), fmt="%d")
    np.savetxt(folder / "index_target.txt", [features], fmt="%d")
    g = np.random.default_rng(seed)
    n_test = max(1, round(test_fraction * rows))
    for i in range(splits):
        order = g.permutation(rows)
        np.savetxt(folder / f"index_train_{i}.txt", np.sort(order[n_test:]), fmt="%d")
        np.savetxt(folder / f"index_test_{i}.txt", np.sort(order[:n_test]), fmt="%d")
    grids: dict[str, list[float]] = {
        "n_splits": [splits],
        "n_hidden": [hidden],
        "n_epochs": [epochs],
        "dropout_rates": list(dropout_rates),
        "tau_values": list(tau_values),
    }
    for setting, values in grids.items():
        np.savetxt(folder / f"{setting}.txt", np.asarray(values), fmt="%g")
    return folder
