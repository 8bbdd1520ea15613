r"""Training and scoring the UCI runs of one method as one vectorised model (``MLP(runs=R)``)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any, cast

import numpy as np
import pyro
import torch

from pyro_dropout.guides import init_to_fan_in, init_to_glorot
from pyro_dropout.infer import CompiledSVI
from pyro_dropout.metrics import score_gaussian_draws
from pyro_dropout.nn import MLP
from pyro_dropout.prediction import predict, predict_standard

from ..core.checkpoint import Checkpoints, TrainingCheckpoint
from ..core.options import flatten
from ..core.store import ResultStore
from ..core.training import Standardiser, train_runs
from .method import AfterTraining, BuildContext, Method
from .settings import Settings, UCIBenchmark

__all__ = [
    "INITS",
    "Built",
    "Spec",
    "build_runs",
    "draws_per_chunk",
    "scores_dict",
    "train_and_score",
    "training_key",
]

INITS: dict[str, Callable] = {"fan-in": init_to_fan_in, "glorot": init_to_glorot}
LEVELS = (0.5, 0.9, 0.95)


@dataclass
class Spec:
    """One training run: a split, its hyper-parameters (``hyper``: p, tau, epochs, length_scale...),
    its rows, and the rows it is scored on (``test``: also scored, under the key ``"test"``)."""

    split: int
    train: np.ndarray
    score: np.ndarray
    hyper: dict[str, Any] = field(default_factory=dict)
    member: int = 0  # ensemble member
    test: np.ndarray | None = None
    validates: bool = False  # ``score`` holds validation rows (the grid stage), not test rows

    @property
    def epochs(self) -> int | None:
        return self.hyper.get("epochs")


def stack_rows(
    bench: UCIBenchmark, specs: list[Spec], rows: Callable[[Spec], np.ndarray], dev: torch.device
) -> tuple:
    dtype = torch.get_default_dtype()
    x = torch.tensor(np.stack([bench.x[rows(sp)] for sp in specs]), dtype=dtype, device=dev)
    y = torch.tensor(np.stack([bench.y[rows(sp)] for sp in specs]), dtype=dtype, device=dev)
    return x, y


def _context(bench: UCIBenchmark, specs: list[Spec], stats: Standardiser, s: Settings) -> BuildContext:
    d, widths, runs, dev = (
        bench.x.shape[1],
        (bench.n_hidden,) * s.hidden_layers,
        len(specs),
        torch.device(s.device),
    )
    return BuildContext(
        network=lambda **kw: MLP(d, hidden=widths, runs=runs, **kw).to(dev),
        hyper=[sp.hyper for sp in specs],
        fan_in=[d, *widths],
        target_scale=stats.y_std.to(dev),
        init_loc_fn=INITS[s.init],
        length_scale=s.length_scale,
        per_example_masks=s.per_example_masks,
        device=dev,
    )


def draws_per_chunk(limit: int, runs: int, rows: int, width: int, budget_mb: float) -> int:
    """How many prediction draws to make at once so that one chunk stays within ``budget_mb``:
    a draw holds a ``[runs, rows, width]`` activation (measured peak about 1.2x its size in
    float32; this allows 2x). At least one draw, at most ``limit``."""
    per_draw = 2 * runs * rows * max(width, 1) * 4
    return max(1, min(limit, int(budget_mb * 2**20) // per_draw))


def _chunk(model: MLP, s: Settings, x: torch.Tensor) -> int:
    widest = max(layer.out_features for layer in [*model.hidden, model.output])
    return draws_per_chunk(s.chunk_size, x.shape[0], x.shape[1], widest, s.chunk_memory_mb)


def training_key(bench: UCIBenchmark, method: Method, specs: list[Spec], s: Settings) -> str:
    """A hash of everything that decides a vectorised training: the data set and its rows, the
    method and its options, each run's hyper-parameters and the training settings."""
    h = hashlib.sha256()
    skip = ("num_samples", "validation_samples", "chunk_size", "chunk_memory_mb", "progress", "device")
    settings = {k: v for k, v in asdict(s).items() if k not in skip}
    options = flatten(method.options, method.prefix)
    runs = [[sp.split, sp.hyper, sp.member, len(sp.train), len(sp.score)] for sp in specs]
    payload = [bench.name, method.name, settings, options, runs, bench.n_hidden, bench.n_epochs]
    h.update(json.dumps(payload, sort_keys=True).encode())
    for sp in specs:
        h.update(np.ascontiguousarray(sp.train, dtype=np.int64).tobytes())
    h.update(np.ascontiguousarray(bench.x, dtype=np.float64).tobytes())
    h.update(np.ascontiguousarray(bench.y, dtype=np.float64).tobytes())
    return h.hexdigest()


def _checkpoint(
    bench: UCIBenchmark,
    method: Method,
    specs: list[Spec],
    s: Settings,
    svi: Any,
    checkpoints: Checkpoints | None,
) -> TrainingCheckpoint | None:
    if checkpoints is None:
        return None
    key = training_key(bench, method, specs, s)
    path = ResultStore(checkpoints.folder).checkpoint_path(bench.name, method.name, key)
    return TrainingCheckpoint(path, svi, key, checkpoints.every)


@dataclass
class Built:
    """The runs of ``specs`` built as one model: the model, guide and loss, the training rows'
    statistics, and the training and scoring rows ``[R, n, d]``, ``[R, n]`` (original scale)."""

    model: Any
    guide: Any
    loss: Any
    stats: Standardiser
    train: tuple[torch.Tensor, torch.Tensor]
    score: tuple[torch.Tensor, torch.Tensor]


def build_runs(bench: UCIBenchmark, method: Method, specs: list[Spec], s: Settings) -> Built:
    """Clear the parameter store, seed, and build ``specs`` as one vectorised model of ``method``."""
    dev = torch.device(s.device)
    pyro.clear_param_store()
    pyro.set_rng_seed(s.seed)
    train = stack_rows(bench, specs, lambda sp: sp.train, dev)
    score = stack_rows(bench, specs, lambda sp: sp.score, dev)
    stats = Standardiser.fit(*train)
    model, guide, loss = method.build(_context(bench, specs, stats, s))
    return Built(model, guide, loss, stats, train, score)


def train_and_score(
    bench: UCIBenchmark,
    method: Method,
    specs: list[Spec],
    s: Settings,
    num_samples: int,
    desc: str,
    monitor: Callable[[int, Any, Any, Standardiser], None] | None = None,
    checkpoints: Checkpoints | None = None,
) -> list[dict[str, Any]]:
    """Train ``specs`` (equal-sized rows) as one vectorised model; score each on its ``score`` rows
    (and on its ``test`` rows, if it has them, under the key ``"test"``).

    ``monitor(epoch, model, guide, stats)``, if given, runs after every epoch (it must not draw
    random numbers). With ``checkpoints``, the state of training is kept in its folder every
    ``checkpoints.every`` seconds so that a stopped run resumes where it stood; the file is
    removed once the runs are scored."""
    built = build_runs(bench, method, specs, s)
    svi = CompiledSVI(built.model, built.guide, cast(Any, pyro.optim).Adam({"lr": s.lr}), built.loss)
    epochs = specs[0].epochs or bench.n_epochs * s.epochs_multiplier
    if any((sp.epochs or epochs) != epochs for sp in specs):
        raise ValueError("runs trained together need the same number of epochs")
    stats, (x_train, y_train) = built.stats, built.train
    on_epoch = None if monitor is None else (lambda e: monitor(e, built.model, built.guide, stats))
    checkpoint = _checkpoint(bench, method, specs, s, svi, checkpoints)
    x_std, y_std = stats.x(x_train), stats.y(y_train)
    history = train_runs(
        svi.step, x_std, y_std, epochs, s.batch_size, s.seed, desc, s.progress, on_epoch, checkpoint
    )
    if checkpoints is not None and checkpoint is not None:
        checkpoints.resumed_seconds += checkpoint.earlier
    after = method.after_training(built.model, built.guide, _after_rows(built, specs, s, x_std, y_std))
    scores = _score_rows(bench, method, built, specs, s, num_samples)
    if checkpoint is not None:  # scored: the training state has done its work
        checkpoint.remove()
    if method.members() > 1:
        return scores
    learned = {**method.learned(built.model, built.guide, stats.y_std), **after}
    learned["final_train_loss"] = history[-1] if history else None
    return [
        {**score, **{k: (v[r] if isinstance(v, list) else v) for k, v in learned.items()}}
        for r, score in enumerate(scores)
    ]


def _after_rows(
    built: Built, specs: list[Spec], s: Settings, x_std: torch.Tensor, y_std: torch.Tensor
) -> AfterTraining:
    """What ``after_training`` sees, given the standardised training rows ``x_std``, ``y_std``."""
    stats = built.stats
    held_out = None
    if specs[0].validates:  # the grid stage: its scoring rows are validation rows
        held_out = (stats.x(built.score[0]), stats.y(built.score[1]))
    chunk = _chunk(built.model, s, x_std)
    return AfterTraining(x_std, y_std, stats.y_std, chunk, [sp.hyper for sp in specs], held_out)


def _score_rows(
    bench: UCIBenchmark, method: Method, built: Built, specs: list[Spec], s: Settings, num_samples: int
) -> list[dict[str, Any]]:
    """Each run's scores on its ``score`` rows, and on its ``test`` rows (if any) under ``"test"``."""
    (x_eval, y_eval), stats = built.score, built.stats
    scores = _score(method, built.model, built.guide, stats.x(x_eval), y_eval, stats, specs, s, num_samples)
    if specs[0].test is not None:
        x_test, y_test = stack_rows(bench, specs, lambda sp: cast(np.ndarray, sp.test), x_eval.device)
        on_test = _score(
            method, built.model, built.guide, stats.x(x_test), y_test, stats, specs, s, s.num_samples
        )
        for score, test in zip(scores, on_test, strict=True):
            score["test"] = test
    return scores


def scores_dict(scores: Any, r: int, rmse_standard: float | None) -> dict[str, Any]:
    """Run ``r``'s entry of :class:`~pyro_dropout.metrics.RunScores` as a result's fields."""
    return {
        "rmse": float(scores.rmse[r]),
        "rmse_standard": rmse_standard,
        "test_ll": float(scores.test_ll[r]),
        **{f"coverage_{round(100 * k)}": float(v[r]) for k, v in scores.coverage.items()},
    }


def _score(
    method: Method,
    model: Any,
    guide: Any,
    x_std: torch.Tensor,
    y: torch.Tensor,
    stats: Standardiser,
    specs: list[Spec],
    s: Settings,
    num_samples: int,
) -> list[dict[str, Any]]:
    """Each run's RMSE, standard-dropout RMSE, test log-likelihood and coverage on rows ``x_std, y``."""
    if method.members() > 1:
        return _score_members(model, guide, x_std, y, stats, specs)
    scale, shift = stats.y_std.unsqueeze(-1), stats.y_mean.unsqueeze(-1)

    def draw(c: int) -> tuple[torch.Tensor, torch.Tensor]:
        pred = predict(model, guide, x_std, num_samples=c, chunk_size=c, return_sites=())
        return pred.means["obs"] * scale + shift, pred.variances["obs"] * scale.pow(2)

    scores = score_gaussian_draws(draw, y, method.draws(num_samples), _chunk(model, s, x_std), LEVELS)
    standard = predict_standard(model, guide, x_std).means["obs"][0] * scale + shift
    rmse_standard = (standard - y).pow(2).mean(-1).sqrt()
    return [scores_dict(scores, r, float(rmse_standard[r])) for r in range(len(specs))]


def _fixed(draws: tuple[torch.Tensor, torch.Tensor], count: int) -> tuple[torch.Tensor, torch.Tensor]:
    return draws


def _score_members(
    model: Any, guide: Any, x: torch.Tensor, y: torch.Tensor, stats: Standardiser, specs: list[Spec]
) -> list[dict[str, Any]]:
    """Each split's members form an equally weighted mixture of Gaussians."""
    pred = predict_standard(model, guide, x)
    scale = stats.y_std.unsqueeze(-1)
    mu = pred.means["obs"][0] * scale + stats.y_mean.unsqueeze(-1)  # [R, m]
    var = pred.variances["obs"][0] * scale.pow(2)
    by_split = {}
    for split in sorted({sp.split for sp in specs}):
        rows = [r for r, sp in enumerate(specs) if sp.split == split]
        members = (mu[rows].unsqueeze(1), var[rows].unsqueeze(1))  # [M, 1, m]: members are the draws
        scores = score_gaussian_draws(partial(_fixed, members), y[rows[:1]], len(rows), len(rows), LEVELS)
        by_split[split] = scores_dict(scores, 0, None)
    return [by_split[sp.split] for sp in specs]
