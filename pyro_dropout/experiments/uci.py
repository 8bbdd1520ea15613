r"""The UCI regression benchmark protocol (Gal & Ghahramani 2016, §5.3; Hernández-Lobato & Adams 2015).

For each split: standardise X and y with the training split's statistics; grid-search every
(p, tau) pair, training on the first 80% of the training rows (file order) and scoring the
test log-likelihood on the last 20%; retrain the best pair on the whole training split; score
RMSE (MC mean and standard dropout) and test log-likelihood (eq. 13, tau on the original y
scale) with T = 10,000 draws. All runs of a stage (splits x grid) train together as one
vectorised model (``MLP(runs=R)``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..datasets import UCIDataset
from .uci_methods import Checkpoints, Settings, Spec, run_baseline_split, train_and_score
from .uci_table import GRID_SUFFIX, label

__all__ = [
    "METHODS",
    "Settings",
    "Spec",
    "grid_path",
    "grid_points",
    "grid_stage",
    "load_results",
    "result_path",
    "run_uci",
    "split_chunks",
    "status",
]

METHODS = ("mc-dropout", "concrete", "bbalpha-0.5", "bbalpha-1", "mfvi", "ensemble", "sgp", "hmc")
GRID_METHODS = ("mc-dropout", "bbalpha-0.5", "bbalpha-1", "mfvi", "ensemble", "concrete")
ENSEMBLE_SIZE = 5


# the settings a user sets on the command line: a kept result must have been made with the same ones
# (the masks need no check: the two kinds of run go by different labels and files)
CHECKED_SETTINGS = ("epochs_multiplier", "num_samples", "validation_samples", "seed", "init")
METHOD_SETTINGS = {"concrete": ("concrete_tau_init", "concrete_tau")}  # checked for that method only


def _read_kept(paths: dict[int, Path | None], s: Settings, method: str) -> dict[int, dict[str, Any]]:
    """The finished files among ``paths`` (results or grid searches), each checked to have been
    made with this run's settings (``CHECKED_SETTINGS``; else an error)."""
    kept = {i: json.loads(p.read_text()) for i, p in paths.items() if p is not None and p.is_file()}
    for i, stored in kept.items():
        made_with = Settings.from_stored(stored.get("settings", {}))  # missing keys: LEGACY_SETTINGS
        for key in CHECKED_SETTINGS + METHOD_SETTINGS.get(method, ()):
            was, now = getattr(made_with, key), getattr(s, key)
            if was != now:
                raise ValueError(
                    f"{paths[i]} was made with {key}={was!r} but this run has {key}={now!r}; "
                    "give another --out folder (or remove the file to re-run it)"
                )
    return kept


# --- the protocol ------------------------------------------------------------------------------
def _groups(specs: list[Spec]) -> list[list[Spec]]:
    """Runs with the same numbers of rows and epochs train together (each with its own p, tau
    and prior length-scale)."""
    by_size: dict[tuple, list[Spec]] = {}
    for sp in specs:
        test = None if sp.test is None else len(sp.test)
        by_size.setdefault((len(sp.train), len(sp.score), test, sp.epochs), []).append(sp)
    return list(by_size.values())


def split_chunks(
    data: UCIDataset, method: str, splits: list[int], s: Settings, runs_per_split: int
) -> list[list[int]]:
    """The splits of a stage in the groups that train as one vectorised model each, one group
    after another.

    On the CPU a training step is bound by memory traffic once its activations outgrow the
    cache: a group holds as many whole splits as keep its largest activation (runs x
    particles x batch x widest layer) within ``Settings.step_memory_mb``, and at least one
    (``benchmarks/run_chunks.py``). On other devices, or with ``step_memory_mb=None``,
    every split of the stage trains together.
    """
    budget = s.step_memory_mb
    if budget is None or torch.device(s.device).type != "cpu":
        return [list(splits)] if splits else []
    particles = s.particles if method.startswith("bbalpha") else 1
    item = torch.empty((), dtype=torch.get_default_dtype()).element_size()
    per_split = runs_per_split * particles * s.batch_size * data.n_hidden * item
    n = max(1, int(budget * 2**20 // per_split))
    return [splits[i : i + n] for i in range(0, len(splits), n)]


def _run_all(
    data: UCIDataset,
    method: str,
    specs: list[Spec],
    s: Settings,
    num_samples: int,
    desc: str,
    checkpoints: Checkpoints | None = None,
) -> list[dict]:
    results: dict[int, dict] = {}
    for group in _groups(specs):
        bar = f"{desc} ({len(group)} runs)"
        scores = train_and_score(data, method, group, s, num_samples, bar, checkpoints=checkpoints)
        for sp, score in zip(group, scores, strict=True):
            results[id(sp)] = score
    return [results[id(sp)] for sp in specs]


def grid_points(data: UCIDataset, method: str, s: Settings) -> list[dict[str, Any]]:
    """The hyper-parameters a method chooses on the validation rows (``p``, ``tau``, ``epochs``...)."""
    if method == "concrete":
        return [{"length_scale": length} for length in s.concrete_length_scales]
    if method == "mfvi":
        return [{"tau": tau} for tau in data.tau_values]
    if method == "ensemble":
        full = data.n_epochs * s.epochs_multiplier
        return [{"epochs": e} for e in sorted({max(1, round(f * full)) for f in s.ensemble_epoch_fractions})]
    return [{"p": p, "tau": tau} for p in data.dropout_rates for tau in data.tau_values]


def result_path(out: Path, dataset: str, name: str, split: int) -> Path:
    """Where a split's result goes: ``OUT/DATASET_LABEL_splitNN.json`` (``name``: a table label)."""
    return out / f"{dataset}_{name}_split{split:02d}.json"


def grid_path(out: Path, dataset: str, name: str, split: int) -> Path:
    """Where a split's finished grid search is kept until its final model is: ``...splitNN.grid.json``."""
    return result_path(out, dataset, name, split).with_suffix(GRID_SUFFIX)


def load_results(out: Path, dataset: str, name: str, splits: Sequence[int]) -> list[dict[str, Any]]:
    """The stored results of ``splits`` (``name``: a table label such as ``mc-dropout-per-draw``)."""
    rows = []
    for i in splits:
        path = result_path(out, dataset, name, i)
        if not path.is_file():
            raise FileNotFoundError(f"no result file {path}; run `pyro-dropout uci` for split {i} first")
        rows.append(json.loads(path.read_text()))
    return rows


def run_uci(
    data: UCIDataset,
    method: str,
    splits: Sequence[int] | None = None,
    out: Path | None = None,
    settings: Settings | None = None,
    log: Callable[[str], None] = print,
) -> list[dict[str, Any]]:
    """Run the protocol for ``method`` on ``splits`` (default: all); one JSON file per split in ``out``.

    Splits whose result file exists are kept (the run is resumable), if they were made with
    the same command-line settings (``CHECKED_SETTINGS``; else an error). The grid search of
    each split is written to ``grid_path`` as soon as it ends, so a run stopped during the
    final stage resumes there; and while a group of runs trains, its state is kept in ``out``
    every five minutes (``*.train.pt``, removed when the group is scored), so a stopped run
    resumes within minutes of where it stood. Returns the results of the splits run now and of those kept.
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose from {', '.join(METHODS)}")
    s = settings or Settings()
    splits = list(range(data.n_splits)) if splits is None else list(splits)
    bad = [i for i in splits if not 0 <= i < data.n_splits]
    if bad:
        raise ValueError(f"{data.name} has splits 0-{data.n_splits - 1}; got {bad}")
    if not s.retrain and method not in GRID_METHODS:
        raise ValueError(
            f"{method!r} has no grid search, so no grid network to score; "
            f"the methods with one: {', '.join(GRID_METHODS)}"
        )
    name = label(method, s.per_example_masks, s.hidden_layers, s.retrain)
    paths = {i: result_path(out, data.name, name, i) if out else None for i in splits}
    kept = _read_kept(paths, s, method)
    todo = [i for i in splits if i not in kept]
    if kept:
        log(f"{data.name} {method}: keeping finished splits {sorted(kept)}")
    if not todo:
        return [kept[i] for i in splits]
    start = time.perf_counter()
    checkpoints = None if out is None else Checkpoints(out)
    if method in ("sgp", "hmc"):
        results = {i: run_baseline_split(method, data, i, s) for i in todo}
    else:
        grids = {i: grid_path(out, data.name, name, i) if out else None for i in todo}
        results = _neural_protocol(data, method, todo, s, log, grids, checkpoints)
    # a grid search or a training resumed from its checkpoint ran in part in an earlier process
    # (up to its checkpoint): that time counts too
    seconds = time.perf_counter() - start
    seconds += sum({results[i].get("resumed_grid_seconds", 0.0) for i in todo})
    resumed_training = 0.0 if checkpoints is None else checkpoints.resumed_seconds
    seconds += resumed_training
    for i in todo:
        results[i].update(
            dataset=data.name,
            method=method,
            split=i,
            seconds=seconds / len(todo),
            protocol_seconds=seconds,
            splits_run_together=len(todo),
            threads=torch.get_num_threads(),  # PyTorch's CPU threads, for reading the wall time
            resumed_training_seconds=resumed_training,
            settings=asdict(s),
        )
        path = paths[i]
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(results[i], indent=1))
            # the result holds the grid search too: its checkpoint has done its work
            grid_path(path.parent, data.name, name, i).unlink(missing_ok=True)
    log(f"{data.name} {method}: {len(todo)} splits in {seconds:.1f} s")
    return [kept.get(i) or results[i] for i in splits]


def _hyper(sp: Spec) -> dict[str, Any]:
    pairs = (("p", sp.p), ("tau", sp.tau), ("epochs", sp.epochs), ("length_scale", sp.length_scale))
    return {k: v for k, v in pairs if v is not None}


def _fit_and_validate(train: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The grid search's rows: the first 80% of the training rows (file order) fit, the last 20% validate."""
    cut = int(0.8 * len(train))
    return train[:cut], train[cut:]


def grid_stage(
    data: UCIDataset,
    method: str,
    splits: list[int],
    s: Settings,
    done: Callable[[dict[int, list[dict[str, Any]]], float], None] | None = None,
    checkpoints: Checkpoints | None = None,
) -> dict[int, list[dict[str, Any]]]:
    """The protocol's grid search: each split's grid points trained on the first 80% of its
    training rows (file order) and scored on the last 20%. Returns, per split, one row per grid
    point: its hyper-parameters and its validation scores (``test_ll`` is the validation
    log-likelihood); with ``Settings.retrain`` False, also its scores on the test rows (``test``),
    as the published code reports the test score of the grid network that validation chose.

    The splits train in the groups of :func:`split_chunks`; ``done(rows, seconds)``, if given,
    receives each group's rows and wall time as soon as the group ends. With a ``checkpoints``
    folder, each group's training keeps its state there as it goes (``train_and_score``)."""
    if method not in GRID_METHODS:
        raise ValueError(f"{method!r} has no grid search; these do: {', '.join(GRID_METHODS)}")
    members = ENSEMBLE_SIZE if method == "ensemble" else 1
    grid = grid_points(data, method, s)
    # runs that train together: the ensemble's grid points differ in epochs, so train apart
    together = members if method == "ensemble" else members * len(grid)
    validation: dict[int, list[dict[str, Any]]] = {}
    for chunk in split_chunks(data, method, splits, s, together):
        start = time.perf_counter()
        before = 0.0 if checkpoints is None else checkpoints.resumed_seconds
        specs = []
        for i in chunk:
            fit, validate = _fit_and_validate(data.splits[i].train)
            test = None if s.retrain else data.splits[i].test
            specs += [Spec(i, fit, validate, **h, member=m, test=test) for h in grid for m in range(members)]
        desc = f"{data.name} {method} grid"
        scores = _run_all(data, method, specs, s, s.validation_samples, desc, checkpoints)
        rows: dict[int, list[dict[str, Any]]] = {i: [] for i in chunk}
        for sp, sc in zip(specs, scores, strict=True):
            if not sp.member:  # an ensemble is scored as a whole, on its first member's row
                rows[sp.split].append({**_hyper(sp), **sc})
        validation.update(rows)
        if done is not None:  # the time of a training resumed from a checkpoint counts too
            resumed = 0.0 if checkpoints is None else checkpoints.resumed_seconds - before
            done(rows, time.perf_counter() - start + resumed)
    return validation


def _grid_with_checkpoints(
    data: UCIDataset,
    method: str,
    splits: list[int],
    s: Settings,
    log: Callable,
    grids: dict[int, Path | None],
    checkpoints: Checkpoints | None = None,
) -> tuple[dict[int, list[dict[str, Any]]], dict[int, float]]:
    """The grid search of ``splits``, reading finished ones from ``grids`` and writing new ones there.

    Returns each split's grid rows, and for the splits read from ``grids`` the wall time their
    grid search took when it ran (``grid_seconds`` of its checkpoint)."""
    stored = _read_kept(grids, s, method)
    validation = {i: stored[i]["validation"] for i in stored}
    earlier = {i: float(stored[i].get("grid_seconds", 0.0)) for i in stored}
    if stored:
        log(f"{data.name} {method}: keeping the finished grid search of splits {sorted(stored)}")
    todo = [i for i in splits if i not in stored]

    def keep(rows: dict[int, list[dict[str, Any]]], seconds: float) -> None:
        for i, validated in rows.items():
            path = grids[i]
            if path is not None:
                record = {
                    "dataset": data.name,
                    "method": method,
                    "split": i,
                    "grid_seconds": seconds,  # the wall time of the group of splits it trained in
                    "settings": asdict(s),
                    "validation": validated,
                }
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps(record, indent=1))

    if todo:
        validation.update(grid_stage(data, method, todo, s, keep, checkpoints))
    return validation, earlier


def _neural_protocol(
    data: UCIDataset,
    method: str,
    splits: list[int],
    s: Settings,
    log: Callable,
    grids: dict[int, Path | None] | None = None,
    checkpoints: Checkpoints | None = None,
) -> dict[int, dict]:
    chosen: dict[int, dict[str, Any]] = {i: {} for i in splits}
    best: dict[int, dict[str, Any]] = {}  # each split's best grid row
    validation: dict[int, list[dict]] = {}
    earlier: dict[int, float] = {}  # grid seconds of the splits resumed from a checkpoint
    members = ENSEMBLE_SIZE if method == "ensemble" else 1
    if method in GRID_METHODS:
        validation, earlier = _grid_with_checkpoints(
            data, method, splits, s, log, grids or dict.fromkeys(splits), checkpoints
        )
        keys = list(grid_points(data, method, s)[0])
        for i in splits:
            best[i] = max(validation[i], key=lambda r: r["test_ll"])
            chosen[i] = {k: best[i][k] for k in keys}
        log(f"{data.name} {method}: grid chosen {[chosen[i] for i in splits]}")
    resumed = {i: {"resumed_grid_seconds": earlier[i]} if i in earlier else {} for i in splits}
    if not s.retrain:  # the published code's test score: the chosen grid network, trained on 80%
        return {i: _grid_network_result(data, i, validation[i], best[i]) | resumed[i] for i in splits}
    specs, scores = [], []
    for chunk in split_chunks(data, method, splits, s, members):
        some = [
            Spec(i, data.splits[i].train, data.splits[i].test, **chosen[i], member=m)
            for i in chunk
            for m in range(members)
        ]
        specs += some
        desc = f"{data.name} {method} final"
        scores += _run_all(data, method, some, s, s.num_samples, desc, checkpoints)
    results: dict[int, dict] = {}
    for sp, sc in zip(specs, scores, strict=True):
        if sp.member:
            continue
        results[sp.split] = {
            **sc,
            "p": chosen[sp.split].get("p"),
            **{k: v for k, v in chosen[sp.split].items() if k != "p"},
            "n_train": len(sp.train),
            "n_test": len(sp.score),
            "validation": validation.get(sp.split, []),
            **resumed[sp.split],
        }
    return results


def _grid_network_result(
    data: UCIDataset, split: int, validation: list[dict[str, Any]], best: dict[str, Any]
) -> dict[str, Any]:
    """A split's result when the grid network that validation chose (its row ``best``) is scored
    on the test rows."""
    # the grid row's hyper-parameters and learned values (Concrete's p and tau), with its test scores
    kept = {k: v for k, v in best.items() if k != "test" and k not in best["test"]}
    return {
        "p": best.get("p"),
        **kept,
        **best["test"],
        "n_train": len(_fit_and_validate(data.splits[split].train)[0]),
        "n_test": len(data.splits[split].test),
        "validation": validation,
    }


def status(out: Path) -> list[str]:
    """What a results folder holds besides finished splits: each training in progress (its
    checkpoint: epochs done, training time so far, and the time to go at that rate) and each
    finished grid search still waiting for its final model. One line each; none if neither."""
    lines = []
    for path in sorted(out.glob("*.train.pt")):
        state = torch.load(path, map_location="cpu", weights_only=False)
        done, total, seconds = len(state["history"]), state["epochs"], float(state["seconds"])
        to_go = seconds / max(done, 1) * (total - done)
        lines.append(
            f"{state['desc']}: epoch {done}/{total}, {seconds / 60:.1f} min of training kept, "
            f"about {to_go / 60:.0f} min to go at that rate ({path.name})"
        )
    waiting: dict[tuple[str, str], list[int]] = {}
    for path in sorted(out.glob(f"*{GRID_SUFFIX}")):
        record = json.loads(path.read_text())
        waiting.setdefault((record["dataset"], path.name.rsplit("_split", 1)[0]), []).append(record["split"])
    for (dataset, stem), splits in waiting.items():
        name = stem[len(dataset) + 1 :]
        lines.append(f"{dataset} {name}: grid search done, final models to train for splits {splits}")
    return lines
