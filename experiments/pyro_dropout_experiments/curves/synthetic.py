r"""``pyro-dropout synthetic``: paper 001 §4.1, Fig. 1: how Concrete dropout's uncertainties and
learned rates change with the amount of data.

For each size N: ``repeats`` data sets :math:`y = 2x + 8 + \epsilon`, :math:`x, \epsilon \sim
\mathcal{N}(0, 1)` (one per run, trained together), three hidden layers, Concrete dropout with a
heteroscedastic output (a mean and a log-variance, paper 001 after Kendall & Gal 2017) and a
small prior length-scale, so that the data and the dropout entropy decide p. Scored on 1,000
fresh points: epistemic sd (the draws' spread), aleatoric sd (the noise the network predicts;
the truth is 1) and predictive sd (both), each the root of the mean variance over the points.
"""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from pyro_dropout.datasets import linear_noise

from ..core import open_results, save_figure, save_results
from .figures import write_results
from .fit import fit_curves, mc_predictive
from .settings import CurveSettings

__all__ = ["SIZES", "SYNTHETIC", "run_synthetic", "synthetic_figure"]

SIZES = (10, 25, 50, 100, 1000, 10000)
# what the synthetic study changes in the shared settings: paper 001's three hidden layers, and
# a prior length-scale small enough that the weight prior hardly counts next to the data
SYNTHETIC: dict[str, Any] = {"layers": 3, "length_scale": 1e-4, "steps": 4000}


def _data(n: int, repeats: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    pairs = [linear_noise(n, seed=1000 * seed + 10 * r + 1) for r in range(repeats)]
    return np.stack([x for x, _ in pairs]), np.stack([y for _, y in pairs])


def _one_size(n: int, s: CurveSettings, repeats: int, batch: int, progress: bool) -> dict[str, Any]:
    x, y = _data(n, repeats, s.seed)
    start = time.perf_counter()
    fitted = fit_curves(
        x, y, (0.1,) * repeats, s, concrete=True, batch_size=batch, progress=progress, desc=f"N = {n}"
    )
    test_x, _ = linear_noise(1000, seed=10**6 + s.seed)
    pred = mc_predictive(fitted, test_x, s.num_samples)
    epistemic, aleatoric = pred.epistemic_variance.mean(-1), pred.aleatoric_variance.mean(-1)
    rates = {k: v.reshape(-1).tolist() for k, v in fitted.guide.dropout_rates().items()}
    line = np.linspace(-3, 3, 61)
    example = mc_predictive(fitted, line, s.num_samples)
    return {
        "epistemic": epistemic.sqrt().tolist(),
        "aleatoric": aleatoric.sqrt().tolist(),
        "predictive": (epistemic + aleatoric).sqrt().tolist(),
        "p": {k: v for k, v in rates.items() if k != "hidden.0.weight"},  # the inputs are not dropped
        "example": {
            "x": x[0, :, 0].tolist(),
            "y": y[0].tolist(),
            "line": line.tolist(),
            "mean": example.mean[0].tolist(),
            "sd": example.sd[0].tolist(),
        },
        "seconds": time.perf_counter() - start,
    }


def run_synthetic(
    s: CurveSettings,
    out: Path,
    sizes: tuple[int, ...] = SIZES,
    repeats: int = 3,
    batch_size: int = 128,
    progress: bool = True,
) -> dict[str, Any]:
    """Train and score every size; write ``results.json`` (per size and repeat: the three sds and
    the learned p per layer) and ``synthetic.png``; return the results.

    Each size is written to ``results.json`` as it ends: a rerun with the same settings keeps the
    sizes there and runs the others (``--sizes`` may differ between runs; the file holds them all)."""
    made_with = {**asdict(s), "repeats": repeats, "batch_size": batch_size}
    # another run's results are refused before any work; this run's sizes are kept
    record = open_results(out, made_with, ("sizes",), resume=True)  # (older files name their sizes)
    per_size: dict[str, Any] = dict(record.get("per_size", {}))
    for n in sizes:
        if str(n) not in per_size:
            per_size[str(n)] = _one_size(n, s, repeats, batch_size, progress)
            save_results(out, {"settings": made_with, "per_size": per_size})
    every = sorted(int(n) for n in per_size)
    results = {"sizes": every, "repeats": repeats, "per_size": per_size, "settings": made_with}
    for key in ("epistemic", "aleatoric", "predictive"):
        results[key] = [float(np.mean(per_size[str(n)][key])) for n in every]
    layers = list(per_size[str(every[0])]["p"])
    results["p"] = {k: [float(np.mean(per_size[str(n)]["p"][k])) for n in every] for k in layers}
    return write_results(out, results, synthetic_figure, "synthetic.png")


def synthetic_figure(results: dict[str, Any], path: Path) -> Path:
    """Fig. 1's counterpart: (a-c) the three sds against N, each repeat a dot and the mean a line;
    (d) the learned p per layer; (e, f) the smallest and the largest data set with the predictive."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes, per = results["sizes"], results["per_size"]
    fig, axes = plt.subplots(2, 3, figsize=(13, 6.5))
    for ax, key, title in zip(axes[0], ("epistemic", "aleatoric", "predictive"), "abc", strict=True):
        for n in sizes:
            ax.scatter([n] * len(per[str(n)][key]), per[str(n)][key], s=8, color="0.5")
        ax.plot(sizes, results[key], marker="o", color="tab:blue")
        ax.set(xscale="log", xlabel="data points N", ylabel="sd", title=f"({title}) {key} uncertainty")
        if key == "aleatoric":
            ax.axhline(1.0, color="red", ls="--", lw=0.8, label="true noise sd")
            ax.legend(fontsize=8)
    for layer, values in results["p"].items():
        axes[1, 0].plot(sizes, values, marker="o", label=layer)
    axes[1, 0].set(xscale="log", xlabel="data points N", ylabel="p", title="(d) learned dropout p")
    axes[1, 0].legend(fontsize=8)
    for ax, n, title in ((axes[1, 1], sizes[0], "e"), (axes[1, 2], sizes[-1], "f")):
        ex = per[str(n)]["example"]
        line, m, sd = np.asarray(ex["line"]), np.asarray(ex["mean"]), np.asarray(ex["sd"])
        for k in (4, 3, 2, 1):
            ax.fill_between(line, m - 0.5 * k * sd, m + 0.5 * k * sd, color="tab:blue", alpha=0.12, lw=0)
        ax.scatter(ex["x"][:500], ex["y"][:500], s=3, color="red")
        ax.plot(line, m, color="navy")
        ax.set(title=f"({title}) N = {n}: data and predictive ±2 sd", xlabel="x", ylabel="y")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    save_figure(fig, path, dpi=110)
    plt.close(fig)
    return path
