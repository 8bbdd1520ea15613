r"""The methods of the UCI benchmark: building each vectorised model, training and scoring it."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields
from functools import partial
from pathlib import Path
from typing import Any, cast

import numpy as np
import pyro
import torch

from ..baselines import MeanFieldGuide, fit_sparse_gp, run_nuts
from ..datasets import UCIDataset
from ..guides import DropoutGuide, init_to_fan_in, init_to_glorot
from ..infer import BBAlpha, CompiledSVI, DropoutELBO, predict, predict_from_samples, predict_standard
from ..nn import MLP
from .vectorised import (
    Standardiser,
    TrainingCheckpoint,
    draws_per_chunk,
    dropout_draws,
    score_runs,
    train_runs,
)

__all__ = [
    "LEGACY_SETTINGS",
    "Checkpoints",
    "Settings",
    "Spec",
    "run_baseline_split",
    "train_and_score",
    "training_key",
]


# what runs made before a setting existed did: a result file without the key ran so
LEGACY_SETTINGS: dict[str, Any] = {
    "per_example_masks": False,
    "concrete_tau_init": None,
    "concrete_tau": "map",
}


@dataclass
class Settings:
    """Every setting of the protocol; the defaults are the published ones (see docs/uci.md)."""

    epochs_multiplier: int = 100  # n_epochs.txt x 100: the published "10x epochs" setting
    batch_size: int = 128
    lr: float = 1e-3  # Adam, as Keras' default in the published code
    length_scale: float = 1e-2  # prior length-scale l of the dropout methods
    # initial weight means of every network: "fan-in" (torch.nn's U(+-1/sqrt(fan-in))) or "glorot"
    # (Keras' default, used by the published code); biases start at zero either way
    init: str = "fan-in"
    # hidden layers of n_hidden.txt units each: 1 as in the published MC dropout protocol; paper 001
    # (Concrete dropout, section 4.2) used 2 on the UCI data sets
    hidden_layers: int = 1
    num_samples: int = 10_000  # T at test time
    validation_samples: int = 1_000  # T when scoring the grid on the validation rows
    chunk_size: int = 100  # draws per prediction chunk, at most
    chunk_memory_mb: float = 1024.0  # fewer draws a chunk when they would not fit in this
    # on the CPU, a stage's splits train in groups (one vectorised model each, one after another)
    # whose largest training activation (runs x particles x batch x width) fits in this: beyond
    # the cache a step is bound by memory traffic (BB-alpha's 240 kin8nm grid runs as one model,
    # 59 MB, step 2.6x slower than as chunks of 36-60 runs; benchmarks/run_chunks.py). None: every
    # split of a stage in one model, as on a GPU
    step_memory_mb: float | None = 12.0
    particles: int = 10  # K for BB-alpha
    concrete_tau_prior: tuple[float, float] = (0.1, 0.01)  # Gamma(shape, rate) on tau (standardised y)
    # how Concrete dropout's tau (precision of the standardised targets) is fitted: "em" holds it at
    # concrete_tau_init while the network and the rates train (the E-step; paper 001, appendix D,
    # starts tau low and takes partial M-steps so that the rates do not collapse), "map" learns it
    # jointly by MAP, starting at concrete_tau_init (None: a sample median of its prior, a random
    # value per run, as runs made before the setting did). Either way a final M-step then sets it
    # in closed form. "em" from 1.0 was chosen on Boston's validation rows (see docs/uci.md)
    concrete_tau: str = "em"
    concrete_tau_init: float | None = 1.0
    # Concrete dropout's prior length-scale, chosen on the validation rows as in paper 001, appendix D;
    # a weight layer with K_in inputs gets l * sqrt(K_in) (the paper's rule) unless this is False
    concrete_length_scales: tuple[float, ...] = (1e-2, 1e-1, 1.0)
    concrete_scale_by_fan_in: bool = True
    mfvi_length_scale: float = 1.0  # N(0, 1) weights for mean-field VI and HMC
    sgp_inducing: int = 50
    sgp_steps: int = 2000  # Adam steps (lr 0.01) on the VFE bound
    hmc_warmup: int = 500
    hmc_samples: int = 500
    hmc_max_tree_depth: int = 8
    # the ensemble's number of epochs, chosen on the validation rows as fractions of the protocol's
    # epochs: MAP training of mean/variance heads without early stopping overfits the variance
    ensemble_epoch_fractions: tuple[float, ...] = (0.01, 0.025, 0.05, 0.1, 0.25, 1.0)
    # what is scored on the test rows: the chosen grid point retrained on the whole training split
    # (True: the protocol of the task and of Hernandez-Lobato & Adams 2015), or the grid network that
    # validation chose, trained on the first 80% of the rows (False: what the published MC-dropout
    # code does)
    retrain: bool = True
    # training masks of the dropout methods: one per example (True, as the published Keras code) or
    # one per function draw, shared by the minibatch (False); see docs/uci.md
    per_example_masks: bool = True
    seed: int = 0
    device: str = "cpu"
    progress: bool = True

    def __post_init__(self) -> None:
        layers = self.hidden_layers
        if isinstance(layers, bool) or not isinstance(layers, int) or layers < 1:
            raise ValueError(f"hidden_layers must be a whole number >= 1, got {self.hidden_layers!r}")
        budget = self.step_memory_mb
        number = isinstance(budget, int | float) and not isinstance(budget, bool)
        if budget is not None and not (number and math.isfinite(budget) and budget > 0):
            raise ValueError(f"step_memory_mb must be a positive number of MB or None, got {budget!r}")

    @classmethod
    def from_stored(cls, stored: dict[str, Any]) -> Settings:
        """The settings a result file records (its ``settings``), e.g. to re-run part of it.

        Keys this version does not know are dropped; keys a file lacks take the value that
        runs made before the setting existed had (``LEGACY_SETTINGS``), else the default."""
        known = {f.name for f in fields(cls)}
        kept = {k: v for k, v in stored.items() if k in known}
        s = cls(**{**LEGACY_SETTINGS, **kept})
        s.concrete_tau_prior = cast(tuple, tuple(s.concrete_tau_prior))  # JSON gives lists
        s.concrete_length_scales = tuple(s.concrete_length_scales)
        s.ensemble_epoch_fractions = tuple(s.ensemble_epoch_fractions)
        return s


@dataclass
class Checkpoints:
    """Where training keeps its state as it goes (``train_and_score``), and how often
    (seconds); ``resumed_seconds`` adds up the training time that the trainings resumed from
    there had spent in the processes that were stopped, up to their last checkpoint."""

    folder: Path
    every: float = 300.0
    resumed_seconds: float = 0.0


@dataclass
class Spec:
    """One training run: a split, its hyper-parameters, and its rows."""

    split: int
    train: np.ndarray
    score: np.ndarray
    p: float | None = None
    tau: float | None = None  # precision on the original y scale
    member: int = 0  # ensemble member
    epochs: int | None = None  # None: n_epochs.txt x epochs_multiplier
    length_scale: float | None = None  # None: Settings.length_scale
    # rows also scored, with Settings.num_samples draws, under the key "test" (the published code
    # scores the grid network that validation chose on the test rows)
    test: np.ndarray | None = None
    extra: dict[str, Any] = field(default_factory=dict)


INITS: dict[str, Callable] = {"fan-in": init_to_fan_in, "glorot": init_to_glorot}
CONCRETE_TAU = ("map", "em")


# --- building a vectorised model for a method --------------------------------------------------
def _build(method: str, d: int, hidden: int, specs: list[Spec], stats: Standardiser, s: Settings) -> tuple:
    runs = len(specs)
    if s.init not in INITS:
        raise ValueError(f"unknown init {s.init!r}; choose from {', '.join(INITS)}")
    widths = (hidden,) * s.hidden_layers
    init_loc_fn = INITS[s.init]
    dev = torch.device(s.device)

    def per_run(values: Sequence[float | None]) -> torch.Tensor:
        if any(v is None for v in values):
            raise ValueError(f"{method}: every run needs its grid values (p, tau)")
        return torch.tensor(values, dtype=torch.get_default_dtype(), device=dev)

    # one prior length-scale for all runs, or (Concrete dropout's grid) one per run
    lengths = [s.length_scale if sp.length_scale is None else sp.length_scale for sp in specs]
    length_scale: float | torch.Tensor = lengths[0] if len(set(lengths)) == 1 else per_run(lengths)
    if method == "concrete":
        per_layer = [length_scale * math.sqrt(k) for k in (d, *widths)]  # K_in of each weight layer
        if s.concrete_tau not in CONCRETE_TAU:
            raise ValueError(
                f"unknown concrete_tau {s.concrete_tau!r}; choose from {', '.join(CONCRETE_TAU)}"
            )
        held = s.concrete_tau == "em"
        if held and s.concrete_tau_init is None:
            raise ValueError("concrete_tau='em' holds tau at concrete_tau_init, which is None")
        model = MLP(
            d,
            hidden=widths,
            tau=torch.full((runs,), float(cast(float, s.concrete_tau_init)), device=dev)
            if held
            else "learned",
            tau_prior=s.concrete_tau_prior,
            runs=runs,
            length_scale=per_layer if s.concrete_scale_by_fan_in else length_scale,
        ).to(dev)
        init = torch.full((runs, 1), 0.1, device=dev)  # one learned rate per run and layer
        if s.concrete_tau_init is not None and not held:
            init_loc_fn = _start_tau_at(float(s.concrete_tau_init), init_loc_fn)
        guide = DropoutGuide(model, concrete=True, init_dropout=init, init_loc_fn=init_loc_fn)
        return model, guide, DropoutELBO(per_example_masks=s.per_example_masks)
    if method == "ensemble":
        model = MLP(
            d, hidden=widths, likelihood="heteroscedastic", runs=runs, length_scale=s.length_scale
        ).to(dev)
        return model, DropoutGuide(model, dropout=0.0, init_loc_fn=init_loc_fn), DropoutELBO()
    # tau on the original scale -> precision of the standardised targets: tau * std_y^2
    tau_norm = per_run([sp.tau for sp in specs]) * stats.y_std.to(dev).pow(2)
    if method == "mfvi":
        model = MLP(
            d, hidden=widths, tau=tau_norm, runs=runs, prior="normal", length_scale=s.mfvi_length_scale
        ).to(dev)
        return model, MeanFieldGuide(model, init_loc_fn=init_loc_fn), DropoutELBO()
    model = MLP(d, hidden=widths, tau=tau_norm, runs=runs, length_scale=length_scale).to(dev)
    p = per_run([sp.p for sp in specs]).reshape(runs, 1)
    guide = DropoutGuide(model, dropout=p, init_loc_fn=init_loc_fn)
    loss = (
        DropoutELBO(per_example_masks=s.per_example_masks)
        if method == "mc-dropout"
        else BBAlpha(
            float(method.split("-")[1]), num_particles=s.particles, per_example_masks=s.per_example_masks
        )
    )
    return model, guide, loss


def _tau_or(site: dict[str, Any], value: float, fallback: Callable) -> torch.Tensor:
    if site["name"] == "tau":
        fn = site["fn"]
        return torch.full(fn.batch_shape + fn.event_shape, value, dtype=fn.mean.dtype, device=fn.mean.device)
    return fallback(site)


def _start_tau_at(value: float, fallback: Callable) -> Callable:
    """An ``init_loc_fn`` that starts the ``"tau"`` site at ``value`` and the others by ``fallback``."""
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"concrete_tau_init must be a positive finite precision, got {value!r}")
    return partial(_tau_or, value=value, fallback=fallback)


def _tensors(
    data: UCIDataset, specs: list[Spec], rows: Callable[[Spec], np.ndarray], dev: torch.device
) -> tuple:
    x = torch.tensor(
        np.stack([data.x[rows(sp)] for sp in specs]), dtype=torch.get_default_dtype(), device=dev
    )
    y = torch.tensor(
        np.stack([data.y[rows(sp)] for sp in specs]), dtype=torch.get_default_dtype(), device=dev
    )
    return x, y


def train_and_score(
    data: UCIDataset,
    method: str,
    specs: list[Spec],
    s: Settings,
    num_samples: int,
    desc: str,
    monitor: Callable[[int, Any, Any, Standardiser], None] | None = None,
    checkpoints: Checkpoints | None = None,
) -> list[dict[str, Any]]:
    """Train ``specs`` (equal-sized rows) as one vectorised model; score each on its ``score`` rows
    (and on its ``test`` rows, if it has them, under the key ``"test"``).

    ``monitor(epoch, model, guide, stats)``, if given, runs after every epoch (for
    diagnostics; it must not draw random numbers). With ``checkpoints``, the state of training
    is kept in its folder every ``checkpoints.every`` seconds (and when training ends) in a
    file named by what is trained (:func:`training_key`), so that a stopped run resumes where
    it stood; the file is removed once the runs are scored.
    """
    dev = torch.device(s.device)
    pyro.clear_param_store()
    pyro.set_rng_seed(s.seed)
    x_train, y_train = _tensors(data, specs, lambda sp: sp.train, dev)
    x_eval, y_eval = _tensors(data, specs, lambda sp: sp.score, dev)
    stats = Standardiser.fit(x_train, y_train)
    model, guide, loss = _build(method, data.x.shape[1], data.n_hidden, specs, stats, s)
    svi = CompiledSVI(model, guide, cast(Any, pyro.optim).Adam({"lr": s.lr}), loss)
    epochs = specs[0].epochs or data.n_epochs * s.epochs_multiplier
    if any((sp.epochs or epochs) != epochs for sp in specs):
        raise ValueError("runs trained together need the same number of epochs")
    on_epoch = None if monitor is None else (lambda e: monitor(e, model, guide, stats))
    checkpoint = None
    if checkpoints is not None:
        key = training_key(data, method, specs, s)
        path = checkpoints.folder / f"{data.name}_{method}_{key[:16]}.train.pt"
        checkpoint = TrainingCheckpoint(path, svi, key, checkpoints.every)
    history = train_runs(
        svi.step,
        stats.x(x_train),
        stats.y(y_train),
        epochs,
        s.batch_size,
        s.seed,
        desc,
        s.progress,
        on_epoch,
        checkpoint,
    )
    if checkpoints is not None and checkpoint is not None:
        checkpoints.resumed_seconds += checkpoint.earlier
    tau_before = None
    if method == "concrete":
        tau_before = _final_tau_step(model, guide, stats.x(x_train), stats.y(y_train), s)
    scores = _score(method, model, guide, stats.x(x_eval), y_eval, stats, specs, s, num_samples)
    if specs[0].test is not None:
        x_test, y_test = _tensors(data, specs, lambda sp: cast(np.ndarray, sp.test), dev)
        on_test = _score(method, model, guide, stats.x(x_test), y_test, stats, specs, s, s.num_samples)
        for score, test in zip(scores, on_test, strict=True):
            score["test"] = test
    if checkpoint is not None:  # scored: the training state has done its work
        checkpoint.remove()
    if method == "ensemble":
        return scores
    learned = _learned(method, model, guide, stats)
    if tau_before is not None:
        learned["tau_before_m_step"] = (tau_before / stats.y_std.to(tau_before).pow(2)).tolist()
    learned["final_train_loss"] = history[-1] if history else None
    return [
        {**score, **{k: (v[r] if isinstance(v, list) else v) for k, v in learned.items()}}
        for r, score in enumerate(scores)
    ]


# settings that do not change what training computes
_NOT_TRAINING = ("num_samples", "validation_samples", "chunk_size", "chunk_memory_mb", "progress", "device")


def training_key(data: UCIDataset, method: str, specs: list[Spec], s: Settings) -> str:
    """A hash of everything that decides a vectorised training: the data set and its rows, the
    method, each run's hyper-parameters and the settings (those of training only)."""
    h = hashlib.sha256()
    settings = {k: v for k, v in asdict(s).items() if k not in _NOT_TRAINING}
    runs = [
        [sp.split, sp.p, sp.tau, sp.member, sp.epochs, sp.length_scale, len(sp.train), len(sp.score)]
        for sp in specs
    ]
    h.update(json.dumps([data.name, method, settings, runs, data.n_hidden, data.n_epochs]).encode())
    for sp in specs:
        h.update(np.ascontiguousarray(sp.train, dtype=np.int64).tobytes())
    h.update(np.ascontiguousarray(data.x, dtype=np.float64).tobytes())
    h.update(np.ascontiguousarray(data.y, dtype=np.float64).tobytes())
    return h.hexdigest()


def _score(
    method: str,
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
    if method == "ensemble":
        return _score_ensemble(model, guide, x_std, y, stats, specs)
    chunk = draws_per_chunk(s.chunk_size, len(specs), x_std.shape[1], _widest(model), s.chunk_memory_mb)
    scores = score_runs(dropout_draws(model, guide, x_std, stats.y_mean, stats.y_std), y, num_samples, chunk)
    standard = predict_standard(model, guide, x_std).means["obs"][0] * stats.y_std.unsqueeze(
        -1
    ) + stats.y_mean.unsqueeze(-1)
    rmse_standard = (standard - y).pow(2).mean(-1).sqrt()
    return [
        {
            "rmse": float(scores.rmse[r]),
            "rmse_standard": float(rmse_standard[r]),
            "test_ll": float(scores.test_ll[r]),
            **{f"coverage_{round(100 * k)}": float(v[r]) for k, v in scores.coverage.items()},
        }
        for r in range(len(specs))
    ]


def _widest(model: MLP) -> int:
    """The widest layer of the network, which sets the memory of a prediction draw."""
    return max(layer.out_features for layer in [*model.hidden, model.output])


def _final_tau_step(
    model: Any, guide: Any, x: torch.Tensor, y: torch.Tensor, s: Settings, draws: int = 200
) -> torch.Tensor:
    r"""The final M-step of Concrete dropout (paper 001, appendix D) in closed form.

    For :math:`y \sim \mathcal{N}(f(x), \tau^{-1})` and :math:`\tau \sim \mathrm{Gamma}(a, b)`,
    the MAP precision given the variational distribution is
    :math:`\tau^* = (a - 1 + N/2) / (b + \tfrac12 \sum_n \mathbb{E}_q (y_n - f(x_n))^2)`; the
    expectation uses ``draws`` dropout draws. Sets each run's ``tau`` to :math:`\tau^*` and
    returns the values before.
    """
    a, b = s.concrete_tau_prior
    chunk = draws_per_chunk(s.chunk_size, x.shape[0], x.shape[1], _widest(model), s.chunk_memory_mb)
    pred = predict(model, guide, x, num_samples=draws, chunk_size=chunk, return_sites=())
    sse = (pred.means["obs"] - y).pow(2).mean(0).sum(-1)  # [R]: sum over points of E_q (y - f)^2
    n = y.shape[-1]
    tau_star = (a - 1 + n / 2) / (b + sse / 2)
    before = _tau_of(model, guide).clone()
    with torch.no_grad():
        if model.tau_learned:
            param = guide.locs.tau_unconstrained
            param.copy_(
                torch.distributions.biject_to(torch.distributions.constraints.positive).inv(
                    tau_star.reshape(param.shape).to(param)
                )
            )
        else:  # held during training (concrete_tau="em")
            model.fixed_tau.copy_(tau_star.reshape(model.fixed_tau.shape))
    return before


def _tau_of(model: Any, guide: Any) -> torch.Tensor:
    """Each run's precision of the standardised targets, ``[R]``: MAP estimate or held value."""
    return (guide.median()["tau"] if model.tau_learned else model.fixed_tau).reshape(-1)


def _learned(method: str, model: Any, guide: Any, stats: Standardiser) -> dict[str, Any]:
    if method != "concrete":
        return {}
    rates = {k: v.reshape(-1).tolist() for k, v in guide.dropout_rates().items()}
    tau_norm = _tau_of(model, guide)
    tau = (tau_norm / stats.y_std.to(tau_norm).pow(2)).tolist()  # back to the original scale
    runs = len(tau)
    return {"learned_p": [{k: v[r] for k, v in rates.items()} for r in range(runs)], "tau": tau}


def _score_ensemble(
    model: Any, guide: Any, x: torch.Tensor, y: torch.Tensor, stats: Standardiser, specs: list[Spec]
) -> list[dict[str, Any]]:
    """Each split's members form an equally weighted mixture of Gaussians."""
    pred = predict_standard(model, guide, x)
    scale = stats.y_std.unsqueeze(-1)
    mu = pred.means["obs"][0] * scale + stats.y_mean.unsqueeze(-1)  # [R, m]
    var = pred.variances["obs"][0] * scale.pow(2)
    splits = sorted({sp.split for sp in specs})
    out_by_split = {}
    for split in splits:
        rows = [r for r, sp in enumerate(specs) if sp.split == split]
        members = (mu[rows].unsqueeze(1), var[rows].unsqueeze(1))  # [M, 1, m]: members are the draws
        scores = score_runs(_fixed(members), y[rows[:1]], len(rows), len(rows))
        out_by_split[split] = {
            "rmse": float(scores.rmse[0]),
            "rmse_standard": None,
            "test_ll": float(scores.test_ll[0]),
            **{f"coverage_{round(100 * k)}": float(v[0]) for k, v in scores.coverage.items()},
        }
    return [out_by_split[sp.split] for sp in specs]


def _fixed(draws: tuple[torch.Tensor, torch.Tensor]) -> Callable[[int], tuple[torch.Tensor, torch.Tensor]]:
    return lambda c: draws


def run_baseline_split(method: str, data: UCIDataset, split: int, settings: Settings) -> dict[str, Any]:
    """One split of the UCI protocol for the non-vectorised baselines ``"sgp"`` and ``"hmc"``."""
    rows = data.splits[split]
    dtype = torch.get_default_dtype()
    x_train = torch.tensor(data.x[rows.train], dtype=dtype).unsqueeze(0)
    y_train = torch.tensor(data.y[rows.train], dtype=dtype).unsqueeze(0)
    x_test = torch.tensor(data.x[rows.test], dtype=dtype).unsqueeze(0)
    y_test = torch.tensor(data.y[rows.test], dtype=dtype).unsqueeze(0)
    stats = Standardiser.fit(x_train, y_train)
    xs, ys, xt = stats.x(x_train)[0], stats.y(y_train)[0], stats.x(x_test)[0]
    scale, shift = stats.y_std, stats.y_mean
    extra: dict[str, Any] = {}
    if method == "sgp":
        gp = fit_sparse_gp(
            xs, ys, min(settings.sgp_inducing, len(xs)), settings.sgp_steps, seed=settings.seed
        )
        with torch.no_grad():
            mu, var = (t.to(dtype) for t in gp(xt.double(), full_cov=False, noiseless=False))
        mu, var = mu.unsqueeze(0).unsqueeze(0), var.unsqueeze(0).unsqueeze(0)  # one "draw", one run
        num = 1
        extra["noise_sd"] = float(gp.noise.detach().sqrt() * scale[0])
    elif method == "hmc":
        model = MLP(
            xs.shape[1],
            hidden=(data.n_hidden,) * settings.hidden_layers,
            tau="learned",
            tau_prior=settings.concrete_tau_prior,
            prior="normal",
            length_scale=settings.mfvi_length_scale,
        )
        samples = run_nuts(
            model,
            xs,
            ys,
            settings.hmc_warmup,
            settings.hmc_samples,
            settings.hmc_max_tree_depth,
            settings.seed,
        )
        pred = predict_from_samples(model, samples, xt, return_sites=())
        mu, var = pred.means["obs"].unsqueeze(1), pred.variances["obs"].unsqueeze(1)  # [T, 1, m]
        num = mu.shape[0]
        extra["num_posterior_samples"] = num
        extra["tau"] = float((samples["tau"] / scale.pow(2)).mean())
    else:
        raise ValueError(f"not a baseline run split by split: {method!r}")
    mu, var = mu * scale.reshape(1, 1, 1) + shift.reshape(1, 1, 1), var * scale.pow(2).reshape(1, 1, 1)
    scores = score_runs(lambda c: (mu, var), y_test, num, num)
    return {
        "rmse": float(scores.rmse[0]),
        "rmse_standard": None,
        "test_ll": float(scores.test_ll[0]),
        **{f"coverage_{round(100 * k)}": float(v[0]) for k, v in scores.coverage.items()},
        "n_train": len(rows.train),
        "n_test": len(rows.test),
        **extra,
    }
