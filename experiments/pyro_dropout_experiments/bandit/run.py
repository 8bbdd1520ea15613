"""``pyro-dropout bandit``: paper 000 §5.4's Thompson sampling with MC dropout on the wheel
bandit of Riquelme et al. (2018): cumulative regret of Thompson sampling with MC dropout and
with Concrete dropout, ε-greedy and a uniform policy, for each δ. Writes ``results.json`` and
``bandit.png``."""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, cast

import pyro
import torch
from pyro.infer import SVI

from pyro_dropout.guides import DropoutGuide
from pyro_dropout.infer import DropoutELBO
from pyro_dropout.policies import EpsilonGreedy, ThompsonSampling

from ..core import open_results, save_results
from ..core.progress import Progress
from .figure import bandit_figure
from .model import RewardModel
from .settings import BanditSettings
from .wheel import WheelBandit, wheel_bandit

__all__ = ["play", "run_bandit"]


def _learner(policy: str, s: BanditSettings) -> tuple[Any, Any, Any]:
    pyro.clear_param_store()
    model = RewardModel(2, 5, (s.hidden, s.hidden), s.dropout)
    guide = DropoutGuide(model, concrete=policy == "concrete")
    if policy == "epsilon-greedy":
        return model, guide, EpsilonGreedy(model, guide, s.epsilon)
    return model, guide, ThompsonSampling(model, guide)


def play(policy: str, bandit: WheelBandit, s: BanditSettings, seed: int) -> torch.Tensor:
    """``[rounds]``: the regret of each round of ``policy``. Until the network's first training (and
    for at least ten rounds, each action twice) the actions take turns."""
    pyro.set_rng_seed(seed)
    n = len(bandit.contexts)
    actions = torch.zeros(n, dtype=torch.long)
    if policy == "uniform":
        return bandit.regret(torch.randint(5, (n,)))
    model, guide, chooser = _learner(policy, s)
    svi = SVI(model, guide, cast(Any, pyro.optim).Adam({"lr": s.lr}), DropoutELBO())
    turns = max(10, s.train_every)  # the first training comes after round train_every
    for t in range(n):
        actions[t] = t % 5 if t < turns else int(chooser.act(bandit.contexts[t : t + 1])[0])
        if (t + 1) % s.train_every == 0:
            seen = t + 1
            for _ in range(s.train_steps):
                rows = torch.randint(seen, (min(s.batch_size, seen),))
                chosen = actions[rows]
                rewards = bandit.rewards[rows].gather(-1, chosen.unsqueeze(-1)).squeeze(-1)
                svi.step(bandit.contexts[rows], chosen, rewards, num_data=seen)
    return bandit.regret(actions)


def run_bandit(s: BanditSettings, out: str | Path, progress: bool = True) -> dict[str, Any]:
    """Every (δ, policy, repeat): cumulative regret, and normalised as Riquelme et al. report it
    (100 × the policy's over the uniform policy's)."""
    out = Path(out)
    results: dict[str, Any] = {**open_results(out, asdict(s)), "deltas": {}}  # another run's: refused
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    bar = Progress(
        total=len(s.deltas) * len(s.policies) * s.repeats, disable=not progress, desc="bandit runs"
    )
    for delta in s.deltas:
        entry: dict[str, Any] = {}
        for policy in s.policies:
            curves = []
            for r in range(s.repeats):
                bandit = wheel_bandit(delta, s.rounds, seed=s.seed + r)
                curves.append(play(policy, bandit, s, seed=s.seed + r).cumsum(0))
                bar.update()
            stacked = torch.stack(curves).double()
            entry[policy] = {"cumulative": stacked.mean(0).tolist(), "final": stacked[:, -1].tolist()}
        uniform = torch.tensor(entry["uniform"]["final"]) if "uniform" in entry else None
        for record in entry.values():
            if uniform is not None:
                record["normalised"] = (100 * torch.tensor(record["final"]) / uniform).tolist()
        results["deltas"][f"{delta:g}"] = entry
    bar.close()
    results["seconds"] = round(time.perf_counter() - start, 1)
    save_results(out, results)
    bandit_figure(results, out / "bandit.png")
    return results
