"""``pyro-dropout mnist ood``: a LeNet trained on MNIST tells MNIST test images from Fashion-MNIST
and notMNIST, and its own mistakes from its right answers; MC dropout, Concrete dropout, the
standard network, temperature scaling and a deep ensemble side by side (paper 000 §5.2, the
survey 002). Writes ``results.json`` (after each method: a stopped run keeps what finished; a
rerun of some methods keeps the others' scores) and the figures of this run's methods to ``out``."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..core import open_results, save_results
from .data import OOD_SETS, load_splits
from .figures import ood_figures
from .methods import METHODS, training_of
from .scores import method_scores
from .settings import MnistSettings

__all__ = ["run_ood"]


def run_ood(
    settings: MnistSettings,
    out: str | Path,
    *,
    methods: tuple[str, ...] = METHODS,
    data_dir: str | Path | None = None,
    progress: bool = True,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Train and score each method; returns what ``results.json`` holds."""
    out = Path(out)
    splits = load_splits(
        data_dir,
        validation=settings.validation,
        train_size=settings.train_size,
        test_size=settings.test_size,
        ood=OOD_SETS,
        seed=settings.seed,
    )
    out.mkdir(parents=True, exist_ok=True)  # once the data is there: a bad folder leaves nothing
    # a rerun with these settings keeps the methods it does not train again; other settings are refused
    results = open_results(out, {**vars(settings), "methods": list(methods)}, which=("methods",), resume=True)
    results.setdefault("methods", {})
    done: dict[str, Any] = {}
    for name in methods:
        if name in done:  # scored with the training of an earlier method
            continue
        start = time.perf_counter()
        probs, info = training_of(name).fit(splits, settings, progress)
        seconds = time.perf_counter() - start
        for method, by_set in probs.items():
            if method not in methods:
                continue
            ood = {k: v for k, v in by_set.items() if k != "test"}
            scores = method_scores(by_set["test"], splits.test[1], ood)
            done[method] = by_set
            results["methods"][method] = scores | {"info": info, "train_seconds": round(seconds, 1)}
            acc, nll, ece = scores["accuracy"], scores["nll"], scores["ece"]
            log(f"{method}: accuracy {acc:.4f}, NLL {nll:.4f}, ECE {ece:.4f}")
        save_results(out, results)
    ood_figures(done, splits.test[1], out)
    return results
