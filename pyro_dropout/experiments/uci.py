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
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np
import pyro
import torch

from ..baselines.mean_field import MeanFieldGuide
from ..datasets import UCIDataset
from ..guides import DropoutGuide
from ..infer import BBAlpha, CompiledSVI, DropoutELBO, predict_standard
from ..nn import MLP
from .vectorised import Standardiser, dropout_draws, score_runs, train_runs

__all__ = ["METHODS", "Settings", "Spec", "run_uci"]

METHODS = ("mc-dropout", "concrete", "bbalpha-0.5", "bbalpha-1", "mfvi", "ensemble", "sgp", "hmc")
GRID_METHODS = ("mc-dropout", "bbalpha-0.5", "bbalpha-1", "mfvi")
ENSEMBLE_SIZE = 5


@dataclass
class Settings:
    """Every setting of the protocol; the defaults are the published ones (see docs/uci.md)."""

    epochs_multiplier: int = 100  # n_epochs.txt x 100: the published "10x epochs" setting
    batch_size: int = 128
    lr: float = 1e-3  # Adam, as Keras' default in the published code
    length_scale: float = 1e-2  # prior length-scale l of the dropout methods
    num_samples: int = 10_000  # T at test time
    validation_samples: int = 1_000  # T when scoring the grid on the validation rows
    chunk_size: int = 100
    particles: int = 10  # K for BB-alpha
    concrete_tau_prior: tuple[float, float] = (0.1, 0.01)  # Gamma(shape, rate) on tau (standardised y)
    mfvi_length_scale: float = 1.0  # N(0, 1) weights for mean-field VI and HMC
    sgp_inducing: int = 50
    sgp_steps: int = 2000  # Adam steps (lr 0.01) on the VFE bound
    hmc_warmup: int = 500
    hmc_samples: int = 500
    hmc_max_tree_depth: int = 8
    seed: int = 0
    device: str = "cpu"
    progress: bool = True


@dataclass
class Spec:
    """One training run: a split, its hyper-parameters, and its rows."""

    split: int
    train: np.ndarray
    score: np.ndarray
    p: float | None = None
    tau: float | None = None  # precision on the original y scale
    member: int = 0  # ensemble member
    extra: dict[str, Any] = field(default_factory=dict)


# --- building a vectorised model for a method --------------------------------------------------
def _build(method: str, d: int, hidden: int, specs: list[Spec], stats: Standardiser, s: Settings) -> tuple:
    runs = len(specs)
    dev = torch.device(s.device)

    def per_run(values: list[float | None]) -> torch.Tensor:
        if any(v is None for v in values):
            raise ValueError(f"{method}: every run needs its grid values (p, tau)")
        return torch.tensor(values, dtype=torch.get_default_dtype(), device=dev)

    if method == "concrete":
        model = MLP(
            d,
            hidden=(hidden,),
            tau="learned",
            tau_prior=s.concrete_tau_prior,
            runs=runs,
            length_scale=s.length_scale,
        ).to(dev)
        init = torch.full((runs, 1), 0.1, device=dev)  # one learned rate per run and layer
        return model, DropoutGuide(model, concrete=True, init_dropout=lambda name, site: init), DropoutELBO()
    if method == "ensemble":
        model = MLP(
            d, hidden=(hidden,), likelihood="heteroscedastic", runs=runs, length_scale=s.length_scale
        ).to(dev)
        return model, DropoutGuide(model, dropout=0.0), DropoutELBO()
    # tau on the original scale -> precision of the standardised targets: tau * std_y^2
    tau_norm = per_run([sp.tau for sp in specs]) * stats.y_std.to(dev).pow(2)
    if method == "mfvi":
        model = MLP(
            d, hidden=(hidden,), tau=tau_norm, runs=runs, prior="normal", length_scale=s.mfvi_length_scale
        ).to(dev)
        return model, MeanFieldGuide(model), DropoutELBO()
    model = MLP(d, hidden=(hidden,), tau=tau_norm, runs=runs, length_scale=s.length_scale).to(dev)
    p = per_run([sp.p for sp in specs]).reshape(runs, 1)
    guide = DropoutGuide(model, dropout=lambda name, site: p)
    loss = (
        DropoutELBO()
        if method == "mc-dropout"
        else BBAlpha(float(method.split("-")[1]), num_particles=s.particles)
    )
    return model, guide, loss


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
    data: UCIDataset, method: str, specs: list[Spec], s: Settings, num_samples: int, desc: str
) -> list[dict[str, Any]]:
    """Train ``specs`` (equal-sized rows) as one vectorised model; score each on its ``score`` rows."""
    dev = torch.device(s.device)
    pyro.clear_param_store()
    pyro.set_rng_seed(s.seed)
    x_train, y_train = _tensors(data, specs, lambda sp: sp.train, dev)
    x_eval, y_eval = _tensors(data, specs, lambda sp: sp.score, dev)
    stats = Standardiser.fit(x_train, y_train)
    model, guide, loss = _build(method, data.x.shape[1], data.n_hidden, specs, stats, s)
    svi = CompiledSVI(model, guide, cast(Any, pyro.optim).Adam({"lr": s.lr}), loss)
    epochs = data.n_epochs * s.epochs_multiplier
    history = train_runs(
        svi.step, stats.x(x_train), stats.y(y_train), epochs, s.batch_size, s.seed, desc, s.progress
    )
    tau_before = None
    if method == "concrete":
        tau_before = _final_tau_step(model, guide, stats.x(x_train), stats.y(y_train), s)
    x_std = stats.x(x_eval)
    if method == "ensemble":
        return _score_ensemble(model, guide, x_std, y_eval, stats, specs)
    scores = score_runs(
        dropout_draws(model, guide, x_std, stats.y_mean, stats.y_std), y_eval, num_samples, s.chunk_size
    )
    standard = predict_standard(model, guide, x_std).means["obs"][0] * stats.y_std.unsqueeze(
        -1
    ) + stats.y_mean.unsqueeze(-1)
    rmse_standard = (standard - y_eval).pow(2).mean(-1).sqrt()
    learned = _learned(method, guide, stats)
    if tau_before is not None:
        learned["tau_before_m_step"] = (tau_before / stats.y_std.to(tau_before).pow(2)).tolist()
    learned["final_train_loss"] = history[-1] if history else None
    return [
        {
            "rmse": float(scores.rmse[r]),
            "rmse_standard": float(rmse_standard[r]),
            "test_ll": float(scores.test_ll[r]),
            **{f"coverage_{round(100 * k)}": float(v[r]) for k, v in scores.coverage.items()},
            **{k: (v[r] if isinstance(v, list) else v) for k, v in learned.items()},
        }
        for r in range(len(specs))
    ]


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
    from ..infer import predict

    a, b = s.concrete_tau_prior
    pred = predict(model, guide, x, num_samples=draws, chunk_size=s.chunk_size, return_sites=())
    sse = (pred.means["obs"] - y).pow(2).mean(0).sum(-1)  # [R]: sum over points of E_q (y - f)^2
    n = y.shape[-1]
    tau_star = (a - 1 + n / 2) / (b + sse / 2)
    before = guide.median()["tau"].reshape(-1).clone()
    with torch.no_grad():
        param = guide.locs.tau_unconstrained
        param.copy_(
            torch.distributions.biject_to(torch.distributions.constraints.positive).inv(
                tau_star.reshape(param.shape).to(param)
            )
        )
    return before


def _learned(method: str, guide: Any, stats: Standardiser) -> dict[str, Any]:
    if method != "concrete":
        return {}
    rates = {k: v.reshape(-1).tolist() for k, v in guide.dropout_rates().items()}
    tau_norm = guide.median()["tau"].reshape(-1)
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


# --- the protocol ------------------------------------------------------------------------------
def _groups(specs: list[Spec]) -> list[list[Spec]]:
    """Runs with the same numbers of training and scoring rows train together."""
    by_size: dict[tuple[int, int], list[Spec]] = {}
    for sp in specs:
        by_size.setdefault((len(sp.train), len(sp.score)), []).append(sp)
    return list(by_size.values())


def _run_all(
    data: UCIDataset, method: str, specs: list[Spec], s: Settings, num_samples: int, desc: str
) -> list[dict]:
    results: dict[int, dict] = {}
    for group in _groups(specs):
        scores = train_and_score(data, method, group, s, num_samples, f"{desc} ({len(group)} runs)")
        for sp, score in zip(group, scores, strict=True):
            results[id(sp)] = score
    return [results[id(sp)] for sp in specs]


def _grid(data: UCIDataset, method: str) -> list[tuple[float | None, float | None]]:
    if method == "mfvi":
        return [(None, tau) for tau in data.tau_values]
    return [(p, tau) for p in data.dropout_rates for tau in data.tau_values]


def run_uci(
    data: UCIDataset,
    method: str,
    splits: Sequence[int] | None = None,
    out: Path | None = None,
    settings: Settings | None = None,
    log: Callable[[str], None] = print,
) -> list[dict[str, Any]]:
    """Run the protocol for ``method`` on ``splits`` (default: all); one JSON file per split in ``out``.

    Splits whose result file exists are kept (the run is resumable). Returns the results of
    the splits run now and of those kept.
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose from {', '.join(METHODS)}")
    s = settings or Settings()
    splits = list(range(data.n_splits)) if splits is None else list(splits)
    bad = [i for i in splits if not 0 <= i < data.n_splits]
    if bad:
        raise ValueError(f"{data.name} has splits 0-{data.n_splits - 1}; got {bad}")
    paths = {i: (out / f"{data.name}_{method}_split{i:02d}.json") if out else None for i in splits}
    kept = {i: json.loads(p.read_text()) for i, p in paths.items() if p is not None and p.is_file()}
    todo = [i for i in splits if i not in kept]
    if kept:
        log(f"{data.name} {method}: keeping finished splits {sorted(kept)}")
    if not todo:
        return [kept[i] for i in splits]
    start = time.perf_counter()
    if method in ("sgp", "hmc"):
        from ..baselines import run_baseline_split

        results = {i: run_baseline_split(method, data, i, s) for i in todo}
    else:
        results = _neural_protocol(data, method, todo, s, log)
    seconds = time.perf_counter() - start
    for i in todo:
        results[i].update(
            dataset=data.name,
            method=method,
            split=i,
            seconds=seconds / len(todo),
            protocol_seconds=seconds,
            splits_run_together=len(todo),
            settings=asdict(s),
        )
        path = paths[i]
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(results[i], indent=1))
    log(f"{data.name} {method}: {len(todo)} splits in {seconds:.1f} s")
    return [kept.get(i) or results[i] for i in splits]


def _neural_protocol(
    data: UCIDataset, method: str, splits: list[int], s: Settings, log: Callable
) -> dict[int, dict]:
    chosen: dict[int, tuple[float | None, float | None]] = {}
    validation: dict[int, list[dict]] = {}
    if method in GRID_METHODS:
        grid = _grid(data, method)
        specs = []
        for i in splits:
            train = data.splits[i].train
            cut = int(0.8 * len(train))  # the first 80% (file order) train, the last 20% validate
            specs += [Spec(i, train[:cut], train[cut:], p, tau) for p, tau in grid]
        scores = _run_all(data, method, specs, s, s.validation_samples, f"{data.name} {method} grid")
        for sp, sc in zip(specs, scores, strict=True):
            validation.setdefault(sp.split, []).append({"p": sp.p, "tau": sp.tau, **sc})
        for i in splits:
            best = max(validation[i], key=lambda r: r["test_ll"])
            chosen[i] = (best["p"], best["tau"])
        log(f"{data.name} {method}: grid chosen (p, tau) = {[chosen[i] for i in splits]}")
    members = ENSEMBLE_SIZE if method == "ensemble" else 1
    specs = [
        Spec(i, data.splits[i].train, data.splits[i].test, *chosen.get(i, (None, None)), member=m)
        for i in splits
        for m in range(members)
    ]
    scores = _run_all(data, method, specs, s, s.num_samples, f"{data.name} {method} final")
    results: dict[int, dict] = {}
    for sp, sc in zip(specs, scores, strict=True):
        if sp.member:
            continue
        p, tau = chosen.get(sp.split, (None, None))
        results[sp.split] = {
            **sc,
            "p": p,
            **({"tau": tau} if tau is not None else {}),
            "n_train": len(sp.train),
            "n_test": len(sp.score),
            "validation": validation.get(sp.split, []),
        }
    return results
