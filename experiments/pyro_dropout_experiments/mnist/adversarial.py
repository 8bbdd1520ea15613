"""``pyro-dropout mnist adversarial``: paper 003 §5.3, Figs. 6-7. A 3x1000 MLP trained by
maximum likelihood (no dropout; the prior a weight decay) and with dropout (p = 0.5) for each α,
attacked on MNIST test images in [0, 1]:

* untargeted: one fast-gradient-sign step of size η ∈ [0, 0.5], through the mean of the K_test
  passes (and, for the dropout networks, through a single pass: ``single_draw``);
* targeted: iterative steps of η = 0.01 toward class 0 on every non-zero test digit.

Writes ``results.json`` after every network (a rerun with the same settings resumes) and
``untargeted.png`` and ``targeted.png``."""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from pyro_dropout.metrics import accuracy, negative_log_likelihood
from pyro_dropout.nn import small_mlp

from ..core import open_results, save_results
from .alpha_figures import attack_figure
from .alpha_settings import AttackSettings
from .alpha_training import train_with_alpha
from .attack_scores import targeted_attack, untargeted_attack
from .bbalpha import alpha_key
from .data import load_splits
from .probs import mc_probs
from .settings import MnistSettings

__all__ = ["network_names", "run_adversarial"]


def network_names(a: AttackSettings) -> dict[str, float | None]:
    """``{"mlp": None, "alpha_0": 0.0, ...}``: each network's α (``None``: no dropout)."""
    return {"mlp": None, **{f"alpha_{alpha_key(alpha)}": alpha for alpha in a.alphas}}


def _attacks(
    name: str, alpha: float | None, splits: Any, s: MnistSettings, a: AttackSettings, progress: bool
) -> dict:
    x, y = splits.train
    model = small_mlp(a.width, a.depth)
    flat = x.reshape(len(x), -1)
    guide = train_with_alpha(
        model,
        (flat, y),
        s,
        alpha=alpha,
        particles=a.particles,
        dropout=a.dropout,
        seed=s.seed,
        progress=progress,
        desc=name,
    )
    x_test, y_test = splits.test[0].reshape(len(splits.test[0]), -1), splits.test[1]
    draws = 1 if alpha is None else a.test_samples  # no dropout: every pass is the same
    probs = mc_probs(model, guide, x_test, draws)
    out: dict[str, Any] = {
        "clean": {"accuracy": accuracy(probs, y_test), "test_ll": -negative_log_likelihood(probs, y_test)},
        "untargeted": untargeted_attack(model, guide, x_test, y_test, a.etas, draws),
        "targeted": targeted_attack(
            model, guide, x_test, y_test, a.target, a.target_eta, a.target_steps, draws
        ),
    }
    if alpha is not None:
        single = untargeted_attack(model, guide, x_test, y_test, a.etas, draws, attack_draws=1)
        out["untargeted"]["single_draw"] = {
            k: v for k, v in single.items() if k not in ("eta", "example", "example_at")
        }
    return out


def run_adversarial(
    settings: MnistSettings,
    attack_settings: AttackSettings,
    out: str | Path,
    *,
    data_dir: str | Path | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """``{"untargeted": {network: {"eta", "accuracy", "entropy", "auroc_entropy", ...}}, "targeted":
    {network: {"step", "accuracy", "target_accuracy", ...}}, "clean": {network: ...}}``."""
    s, a, out = settings, attack_settings, Path(out)
    splits = load_splits(
        data_dir, validation=s.validation, train_size=s.train_size, test_size=s.test_size, seed=s.seed
    )
    out.mkdir(parents=True, exist_ok=True)
    how = {k: v for k, v in asdict(a).items() if k != "alphas"}  # a rerun may add networks
    # a rerun with these settings resumes; other settings are refused, never written over
    results = open_results(out, {"mnist": asdict(s), "adversarial": how}, resume=True)
    results.setdefault("seconds", {})
    for part in ("clean", "untargeted", "targeted"):
        results.setdefault(part, {})
    for name, alpha in network_names(a).items():
        if name in results["targeted"]:
            continue
        start = time.perf_counter()
        for part, value in _attacks(name, alpha, splits, s, a, progress).items():
            results[part][name] = value
        results["seconds"][name] = round(time.perf_counter() - start, 1)
        save_results(out, results)
    attack_figure(results["untargeted"], "eta", "η (untargeted step size)", out / "untargeted.png")
    attack_figure(
        results["targeted"],
        "step",
        f"gradient steps toward class {a.target}",
        out / "targeted.png",
        log_x=True,
    )
    return results
