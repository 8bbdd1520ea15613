"""``pyro-dropout mnist bbalpha``: paper 003 §5.2, Figs. 4-5. The 2x100 MLP and Keras's MNIST CNN,
each trained with α ∈ {0, 0.5, 1} (K mask draws per step, p = 0.5, prior l² = 0.1) a few times;
test accuracy and test log-likelihood of the MC-dropout predictive (T draws), mean and standard
error. Writes ``results.json`` after every training (a rerun with the same settings resumes) and
``bbalpha.png``."""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from pyro_dropout.metrics import accuracy, negative_log_likelihood
from pyro_dropout.nn import KerasCNN, small_mlp

from ..core import check_scores, open_results, save_results
from .alpha_figures import bbalpha_figure
from .alpha_settings import AlphaSettings
from .alpha_training import train_with_alpha
from .data import load_splits
from .probs import mc_probs
from .settings import MnistSettings

__all__ = ["alpha_key", "run_bbalpha"]


WHICH = ("models", "alphas", "repeats")  # which trainings to run: a rerun may add to them


def alpha_key(alpha: float) -> str:
    """The results' key of an α: ``"0"``, ``"0.5"``, ``"1"``."""
    return f"{alpha:g}"


def _network(name: str, p: float) -> tuple[Any, float | None, bool]:
    """The model, the guide's rate (``None``: the layers'), and whether it takes flat images."""
    if name == "mlp":
        return small_mlp(), p, True
    return KerasCNN(dropout=p), None, False


def _one_run(
    name: str, alpha: float, repeat: int, splits: Any, s: MnistSettings, a: AlphaSettings, progress: bool
) -> dict:
    model, rate, flat = _network(name, a.dropout)
    shape = (lambda x: x.reshape(len(x), -1)) if flat else (lambda x: x)
    (x, y), (x_test, y_test) = splits.train, splits.test
    desc = f"{name} α={alpha_key(alpha)} #{repeat + 1}"
    guide = train_with_alpha(
        model,
        (shape(x), y),
        s,
        alpha=alpha,
        particles=a.particles,
        dropout=rate,
        seed=s.seed + repeat,
        progress=progress,
        desc=desc,
    )
    probs = mc_probs(model, guide, shape(x_test), s.num_samples)
    return {"accuracy": accuracy(probs, y_test), "test_ll": -negative_log_likelihood(probs, y_test)}


def run_bbalpha(
    settings: MnistSettings,
    alpha_settings: AlphaSettings,
    out: str | Path,
    *,
    data_dir: str | Path | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Every (model, α, repeat) not yet in ``out/results.json``: ``{model: {α: {"accuracy": [..],
    "test_ll": [..]}}}``, with the settings and each training's seconds."""
    s, a, out = settings, alpha_settings, Path(out)
    splits = load_splits(
        data_dir, validation=s.validation, train_size=s.train_size, test_size=s.test_size, seed=s.seed
    )
    out.mkdir(parents=True, exist_ok=True)
    how = {k: v for k, v in asdict(a).items() if k not in WHICH}  # what each training is, not which run
    # a rerun with these settings resumes; other settings are refused, never written over
    results = open_results(out, {"mnist": asdict(s), "bbalpha": how}, resume=True)
    results.setdefault("seconds", {})
    for name in a.models:
        for alpha in a.alphas:
            scores = results.setdefault(name, {}).setdefault(
                alpha_key(alpha), {"accuracy": [], "test_ll": []}
            )
            check_scores(out, f"{name} at alpha {alpha_key(alpha)}", scores, ("accuracy", "test_ll"))
            for repeat in range(len(scores["accuracy"]), a.repeats):
                start = time.perf_counter()
                for k, v in _one_run(name, alpha, repeat, splits, s, a, progress).items():
                    scores[k].append(v)
                results["seconds"].setdefault(name, []).append(round(time.perf_counter() - start, 1))
                save_results(out, results)
    save_results(out, results)
    bbalpha_figure(results, a, out / "bbalpha.png")
    return results
