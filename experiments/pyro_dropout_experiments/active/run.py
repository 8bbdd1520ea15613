"""``pyro-dropout active-learning``: each (acquisition function, seed) run acquires from 20
balanced labels to ``max_labels``, the test error recorded after every round. Writes
``results.json`` after every run (a rerun resumes) and ``active_learning.png``."""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pyro
import torch

from pyro_dropout.active import ActiveLearner, balanced_start
from pyro_dropout.prediction import predict_standard

from ..core import check_scores, missing_runs, resume_runs, store_run
from ..core.progress import Progress
from .figure import active_figure
from .model import fitter, load_pool
from .settings import ActiveSettings

__all__ = ["dropout_off_error", "images_to_reach", "run_active"]

# runs with these settings differing still belong together (which runs, not how each is run)
_WHICH = ("acquisitions", "repeats")
# settings added since results were first kept, with the value that runs as before them
_SINCE = {"steps": 0, "weight_decay": 0.0}


def images_to_reach(labelled: list[float], errors: list[float], error: float) -> float | None:
    """The labelled images at the first round whose test error is at most ``error`` (None: never)."""
    return next((n for n, e in zip(labelled, errors, strict=True) if e <= error), None)


def dropout_off_error(pair: tuple[Any, Any], x: torch.Tensor, y: torch.Tensor, rows: int = 1024) -> float:
    """The test error with dropout off (one pass at the expected weights), as the authors' Keras
    script measures it (``model.evaluate``); no random state is touched, so a run that records it
    draws what one that did not would have."""
    wrong = 0
    with torch.random.fork_rng(devices=[]):
        for i in range(0, len(x), rows):
            pred = predict_standard(*pair, x[i : i + rows])
            (site,) = pred.likelihood_sites()  # the network's one likelihood
            wrong += int((pred.probs[site][0].argmax(-1) != y[i : i + rows]).sum())
    return wrong / len(x)


def _one_run(acquisition: str, seed: int, data: tuple, s: ActiveSettings, bar: Any) -> dict[str, Any]:
    x_pool, y_pool, x_test, y_test = data
    pyro.set_rng_seed(seed)
    start = balanced_start(y_pool.cpu(), s.initial, seed).to(y_pool.device)
    learner = ActiveLearner(
        fitter(s, seed),
        x_pool,
        y_pool,
        x_test,
        y_test,
        acquisition,
        k=s.k,
        num_samples=s.num_samples,
        initial=start,
        subset=s.subset or None,
        warm=s.warm,
        seed=seed,
    )
    off = []  # the test error of each round's network with its dropout off

    def dropout_off() -> float:
        assert learner.pair is not None, "a round trains first"
        return dropout_off_error(learner.pair, x_test, y_test)

    while len(learner.labelled) + s.k <= s.max_labels:
        learner.round()
        off.append(dropout_off())
        bar.update()
    # the last round trains and tests; it acquires nothing more
    learner.history.append({"labelled": float(len(learner.labelled)), "error": learner.train()})
    off.append(dropout_off())
    acquired = learner.labelled[len(start) :]
    return {
        "labelled": [h["labelled"] for h in learner.history],
        "error": [h["error"] for h in learner.history],
        "error_dropout_off": off,
        # Repeated MNIST: how many acquired images are a copy of one acquired before
        "repeats_acquired": len(acquired) - len(set((acquired % (len(x_pool) // s.copies)).tolist())),
    }


def _check_kept(out: Path, results: dict[str, Any]) -> None:
    """Every kept run of ``results.json`` checked as data from outside (a field edited to another
    type, or lost, gave a KeyError or 'string indices must be integers' at the table)."""
    fix = "remove it (or the run) to run it again"
    for acquisition, runs in results["runs"].items():
        if not isinstance(runs, dict):
            raise ValueError(
                f"{out / 'results.json'}: the runs of {acquisition!r} are not a dict by seed; {fix}"
            )
        for seed, record in runs.items():
            where = f"the run of {acquisition} with seed {seed}"
            check_scores(out, where, record, ("labelled", "error"))
            for key in ("to_0.1", "to_0.05"):
                value = record.get(key, "missing")
                if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
                    raise ValueError(
                        f"{out / 'results.json'}: {where} has {key} = {value!r}, not a number; {fix}"
                    )


def run_active(
    s: ActiveSettings, out: str | Path, data_dir: Any = None, progress: bool = True
) -> dict[str, Any]:
    """Every (acquisition, repeat), resumed run by run from ``out/results.json``."""
    if s.max_labels < s.initial * 10:
        raise ValueError(f"--max-labels {s.max_labels} is fewer than the {s.initial * 10} initial labels")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    results = resume_runs(out, asdict(s), _WHICH, _SINCE)
    _check_kept(out, results)
    todo = missing_runs(results, s.acquisitions, s.repeats, s.seed)
    data = load_pool(s, data_dir)
    if s.max_labels > len(data[0]):
        raise ValueError(f"--max-labels {s.max_labels} is more than the pool's {len(data[0])} images")
    per_run = (s.max_labels - 10 * s.initial) // s.k
    bar = Progress(total=len(todo) * per_run, disable=not progress, desc="acquisition rounds")
    for acquisition, seed in todo:
        began = time.perf_counter()
        record = _one_run(acquisition, seed, data, s, bar)
        record["seconds"] = round(time.perf_counter() - began, 1)
        for target in (0.10, 0.05):
            record[f"to_{target:g}"] = images_to_reach(record["labelled"], record["error"], target)
            off = images_to_reach(record["labelled"], record["error_dropout_off"], target)
            record[f"to_{target:g}_dropout_off"] = off
        store_run(out, results, acquisition, seed, record)
    bar.close()
    active_figure(results, out / "active_learning.png")
    return results
