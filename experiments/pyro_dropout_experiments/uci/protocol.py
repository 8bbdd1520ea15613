r"""The UCI regression benchmark protocol (Gal & Ghahramani 2016, §5.3; Hernández-Lobato & Adams 2015).

For each split: standardise X and y with the training split's statistics; grid-search the
method's candidates, training on the first 80% of the training rows (file order) and scoring
the test log-likelihood on the last 20%; retrain the best on the whole training split; score
RMSE (MC mean and standard dropout) and test log-likelihood (eq. 13, tau on the original y
scale) with T = 10,000 draws. All runs of a stage (splits x grid) train together as one
vectorised model (``MLP(runs=R)``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from pyro_dropout.metrics import score_gaussian_draws

from ..core.checkpoint import Checkpoints
from ..core.options import flatten
from ..core.store import ResultStore
from ..core.training import Standardiser
from .labels import label
from .method import GridSetup, Method
from .resume import DATA_KEY, check_grid_rows, data_digest, read_kept
from .runs import Spec, scores_dict, train_and_score
from .settings import Settings, UCIBenchmark
from .stages import Protocol

__all__ = ["UCIProtocol", "fit_and_validate", "grid_setup", "split_chunks"]


def grid_setup(bench: UCIBenchmark, s: Settings) -> GridSetup:
    return GridSetup(
        bench.dropout_rates,
        list(s.tau_values) or bench.tau_values,
        bench.n_epochs * s.epochs_multiplier,
        (bench.n_hidden,) * s.hidden_layers,
    )


def fit_and_validate(train: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The grid search's rows: the first 80% of the training rows (file order) fit, the last 20% validate."""
    cut = int(0.8 * len(train))
    return train[:cut], train[cut:]


def split_chunks(
    bench: UCIBenchmark, method: Method, splits: list[int], s: Settings, runs_per_split: int
) -> list[list[int]]:
    """The splits of a stage in the groups that train as one vectorised model each: on the CPU
    as many whole splits as keep the largest activation (runs x particles x batch x widest
    layer) within ``Settings.step_memory_mb``, and at least one (``benchmarks/run_chunks.py``);
    on other devices, or with ``step_memory_mb=None``, every split of the stage together."""
    budget = s.step_memory_mb
    if budget is None or torch.device(s.device).type != "cpu":
        return [list(splits)] if splits else []
    item = torch.empty((), dtype=torch.get_default_dtype()).element_size()
    per_split = runs_per_split * method.particles() * s.batch_size * bench.n_hidden * item
    n = max(1, int(budget * 2**20 // per_split))
    return [splits[i : i + n] for i in range(0, len(splits), n)]


def _groups(specs: list[Spec]) -> list[list[Spec]]:
    """Runs with the same numbers of rows and epochs train together."""
    by_size: dict[tuple, list[Spec]] = {}
    for sp in specs:
        test = None if sp.test is None else len(sp.test)
        by_size.setdefault((len(sp.train), len(sp.score), test, sp.epochs), []).append(sp)
    return list(by_size.values())


class UCIProtocol(Protocol):
    """The protocol of one method on one data set, its files in ``out`` (none: nothing kept)."""

    def __init__(
        self,
        bench: UCIBenchmark,
        method: Method,
        settings: Settings,
        out: Path | None = None,
        log: Callable[[str], None] = print,
    ) -> None:
        super().__init__(method, log)
        self.bench, self.s = bench, settings
        self.store = None if out is None else ResultStore(out)
        self.checkpoints = None if out is None else Checkpoints(out)
        self.name = label(
            method.name,
            settings.per_example_masks,
            settings.hidden_layers,
            settings.retrain,
            bool(settings.tau_values),
        )
        self.grid = method.grid(grid_setup(bench, settings))
        self.earlier: dict[int, float] = {}  # grid seconds of the splits whose grid was kept

    def path(self, split: int, grid: bool = False) -> Path | None:
        if self.store is None:
            return None
        where = self.store.grid_path if grid else self.store.result_path
        return where(self.bench.name, self.name, split)

    def stored_settings(self) -> dict[str, Any]:
        """The settings a result records, with a digest of the data it was made from."""
        options = flatten(self.method.options, self.method.prefix)
        return {**flatten(self.s), **options, DATA_KEY: data_digest(self.bench)}

    def _train(self, specs: list[Spec], num_samples: int, desc: str) -> list[dict[str, Any]]:
        results: dict[int, dict] = {}
        for group in _groups(specs):
            bar = f"{desc} ({len(group)} runs)"
            scores = train_and_score(
                self.bench, self.method, group, self.s, num_samples, bar, checkpoints=self.checkpoints
            )
            results.update({id(sp): sc for sp, sc in zip(group, scores, strict=True)})
        return [results[id(sp)] for sp in specs]

    def grid_stage(
        self, splits: list[int], done: Callable[[dict[int, list[dict[str, Any]]], float], None] | None = None
    ) -> dict[int, list[dict[str, Any]]]:
        """Each split's grid points trained on the first 80% of its training rows and scored on
        the last 20%: one row per point, its hyper-parameters and validation scores (``test_ll``
        is the validation log-likelihood); with ``Settings.retrain`` False, also its scores on
        the test rows (``test``). ``done(rows, seconds)`` receives each group as it ends."""
        members = self.method.members()
        # runs that train together: grid points that differ in epochs train apart
        together = members if any("epochs" in h for h in self.grid) else members * len(self.grid)
        validation: dict[int, list[dict[str, Any]]] = {}
        for chunk in split_chunks(self.bench, self.method, splits, self.s, together):
            start = time.perf_counter()
            before = 0.0 if self.checkpoints is None else self.checkpoints.resumed_seconds
            specs = []
            for i in chunk:
                fit, held_out = fit_and_validate(self.bench.splits[i].train)
                test = None if self.s.retrain else self.bench.splits[i].test
                specs += [
                    Spec(i, fit, held_out, dict(h), m, test, validates=True)
                    for h in self.grid
                    for m in range(members)
                ]
            scores = self._train(
                specs, self.s.validation_samples, f"{self.bench.name} {self.method.name} grid"
            )
            rows: dict[int, list[dict[str, Any]]] = {i: [] for i in chunk}
            for sp, sc in zip(specs, scores, strict=True):
                if not sp.member:  # an ensemble is scored as a whole, on its first member's row
                    rows[sp.split].append({**sp.hyper, **sc})
            validation.update(rows)
            if done is not None:  # the time of a training resumed from a checkpoint counts too
                resumed = 0.0 if self.checkpoints is None else self.checkpoints.resumed_seconds - before
                done(rows, time.perf_counter() - start + resumed)
        return validation

    def validate(self, splits: list[int]) -> dict[int, list[dict[str, Any]]]:
        """The grid search of ``splits``: finished ones read from their grid files, new ones
        written there as each group ends (so a stop in the final stage resumes there)."""
        if not self.grid:
            return {}
        paths = {i: self.path(i, grid=True) for i in splits}
        stored = read_kept(paths, self.s, self.method, self.bench, grid=True)
        for i, record in stored.items():
            check_grid_rows(paths[i], record["validation"], self.grid)
        validation = {i: stored[i]["validation"] for i in stored}
        self.earlier = {i: float(stored[i].get("grid_seconds", 0.0)) for i in stored}
        if stored:
            what = f"{self.bench.name} {self.method.name}"
            self.log(f"{what}: keeping the finished grid search of splits {sorted(stored)}")

        def keep(rows: dict[int, list[dict[str, Any]]], seconds: float) -> None:
            for i, validated in rows.items():
                path = paths[i]
                if path is not None and self.store is not None:
                    record = {
                        "dataset": self.bench.name,
                        "method": self.method.name,
                        "split": i,
                        "grid_seconds": seconds,
                        "settings": self.stored_settings(),
                        "validation": validated,
                    }
                    self.store.write(path, record)

        todo = [i for i in splits if i not in stored]
        if todo:
            validation.update(self.grid_stage(todo, keep))
        return validation

    def run_stages(self, splits: list[int]) -> dict[int, dict[str, Any]]:
        self.validation = self.validate(splits)
        keys = [*self.grid[0], *self.method.carried()] if self.grid else []
        self.best = {i: self.select(i, self.validation[i]) for i in splits if self.validation.get(i)}
        chosen = {i: {k: self.best[i][k] for k in keys} for i in self.best}
        if chosen:
            self.log(f"{self.bench.name} {self.method.name}: grid chosen {[chosen[i] for i in splits]}")
        results = self.final(splits, chosen)
        for i in splits:
            if i in self.earlier:
                results[i]["resumed_grid_seconds"] = self.earlier[i]
        return results

    def final(self, splits: list[int], chosen: dict[int, dict[str, Any]]) -> dict[int, dict[str, Any]]:
        if self.method.fits_splits:
            return {i: self._fit_split(i) for i in splits}
        if not self.s.retrain:  # the published code's test score: the chosen grid network, trained on 80%
            return {i: self._grid_network_result(i) for i in splits}
        members = self.method.members()
        specs, scores = [], []
        for chunk in split_chunks(self.bench, self.method, splits, self.s, members):
            some = [
                Spec(i, self.bench.splits[i].train, self.bench.splits[i].test, dict(chosen.get(i, {})), m)
                for i in chunk
                for m in range(members)
            ]
            specs += some
            scores += self._train(some, self.s.num_samples, f"{self.bench.name} {self.method.name} final")
        results: dict[int, dict] = {}
        for sp, sc in zip(specs, scores, strict=True):
            if sp.member:
                continue
            hyper = chosen.get(sp.split, {})
            results[sp.split] = {
                **sc,
                "p": hyper.get("p"),
                **{k: v for k, v in hyper.items() if k != "p"},
                "n_train": len(sp.train),
                "n_test": len(sp.score),
                "validation": self.validation.get(sp.split, []),
            }
        return results

    def _grid_network_result(self, split: int) -> dict[str, Any]:
        """A split's result when the grid network that validation chose is scored on the test rows."""
        best = self.best[split]
        # the grid row's hyper-parameters and learned values (Concrete's p and tau), with its test scores
        kept = {k: v for k, v in best.items() if k != "test" and k not in best["test"]}
        return {
            "p": best.get("p"),
            **kept,
            **best["test"],
            "n_train": len(fit_and_validate(self.bench.splits[split].train)[0]),
            "n_test": len(self.bench.splits[split].test),
            "validation": self.validation[split],
        }

    def _fit_split(self, split: int) -> dict[str, Any]:
        """One split of a method fitted split by split (the sparse GP, HMC)."""
        rows, dtype = self.bench.splits[split], torch.get_default_dtype()
        x_train, y_train, x_test, y_test = (
            torch.tensor(a, dtype=dtype).unsqueeze(0)
            for a in (
                self.bench.x[rows.train],
                self.bench.y[rows.train],
                self.bench.x[rows.test],
                self.bench.y[rows.test],
            )
        )
        stats = Standardiser.fit(x_train, y_train)
        scale, shift = stats.y_std, stats.y_mean
        setup = grid_setup(self.bench, self.s)
        mu, var, extra = self.method.fit_split(
            stats.x(x_train)[0], stats.y(y_train)[0], stats.x(x_test)[0], setup, self.s.seed, scale[0]
        )
        mu, var = mu.unsqueeze(1), var.unsqueeze(1)  # [T, 1, m]: one run
        mu, var = mu * scale.reshape(1, 1, 1) + shift.reshape(1, 1, 1), var * scale.pow(2).reshape(1, 1, 1)
        num = mu.shape[0]
        scores = score_gaussian_draws(lambda c: (mu, var), y_test, num, num)
        return {**scores_dict(scores, 0, None), "n_train": len(rows.train), "n_test": len(rows.test), **extra}
