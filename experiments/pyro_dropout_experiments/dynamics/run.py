"""``pyro-dropout dynamics``: paper 001 §4.5, Concrete dropout in model-based RL. After every
episode the dynamics model is refitted on all the transitions so far; the learned p of each
layer and the epistemic uncertainty of each state component (on held-out transitions) are
recorded. Writes ``results.json`` after every run (a rerun resumes) and ``dynamics.png``."""

from __future__ import annotations

import time
from dataclasses import asdict
from functools import partial
from pathlib import Path
from typing import Any, cast

import pyro
import torch
from pyro import poutine

from pyro_dropout.guides import DropoutGuide
from pyro_dropout.infer import CompiledSVI, DropoutELBO
from pyro_dropout.prediction import predict

from ..core import missing_runs, resume_runs, store_run
from ..core.progress import Progress
from ..rl.run import make_env
from .figure import dynamics_figure
from .model import DynamicsModel
from .planner import CartPoleScales, plan
from .settings import DynamicsSettings

__all__ = ["Transitions", "run_agent", "run_dynamics"]

_WHICH = ("agents", "repeats")  # settings naming which runs, not how each is run


class Transitions:
    """Every transition so far, each held out for validation with a fixed probability."""

    def __init__(self, validation: float, generator: torch.Generator) -> None:
        self.states: list[torch.Tensor] = []
        self.actions: list[int] = []
        self.after: list[torch.Tensor] = []
        self.held_out: list[bool] = []
        self.validation, self.generator = validation, generator

    def add(self, state: torch.Tensor, action: int, after: torch.Tensor) -> None:
        self.states.append(state)
        self.actions.append(action)
        self.after.append(after)
        self.held_out.append(bool(torch.rand((), generator=self.generator) < self.validation))

    def tensors(self, held_out: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(states, actions, changes)`` of the training (or held-out) transitions."""
        rows = [i for i, h in enumerate(self.held_out) if h == held_out]
        s = torch.stack([self.states[i] for i in rows])
        return (
            s,
            torch.tensor([self.actions[i] for i in rows]),
            torch.stack([self.after[i] for i in rows]) - s,
        )


def _episode(env: Any, choose: Any, data: Transitions) -> float:
    observation, _ = env.reset()
    total, done = 0.0, False
    while not done:
        state = torch.as_tensor(observation, dtype=torch.float32)
        action = choose(state)
        observation, reward, terminal, truncated, _ = env.step(action)
        data.add(state, action, torch.as_tensor(observation, dtype=torch.float32))
        total, done = total + float(reward), terminal or truncated
    return total


def _fit(svi: Any, data: Transitions, scales: CartPoleScales, s: DynamicsSettings) -> None:
    states, actions, changes = data.tensors(held_out=False)
    x, y = scales.inputs(states, actions), changes / scales.change_sd
    for _ in range(s.train_steps):
        rows = torch.randint(len(x), (min(s.batch_size, len(x)),))
        svi.step(x[rows], y[rows], num_data=len(x))


def _measure(model: Any, guide: Any, data: Transitions, scales: CartPoleScales, s: DynamicsSettings) -> dict:
    """The p of each layer, and per state component the epistemic sd (across draws of the
    predicted change, in the state's units) and the RMSE of the predictive mean, held out."""
    states, actions, changes = data.tensors(held_out=True)
    draws = predict(model, guide, scales.inputs(states, actions), num_samples=s.draws, return_sites=["mean"])
    change = draws["mean"] * scales.change_sd  # [draws, N, 4]
    rates = guide.dropout_rates()
    return {
        "rates": [float(rates[k]) for k in sorted(rates)],
        "epistemic_sd": change.std(0).mean(0).tolist(),
        "rmse": (change.mean(0) - changes).pow(2).mean(0).sqrt().tolist(),
        "held_out": len(states),
    }


def run_agent(agent: str, s: DynamicsSettings, seed: int, bar: Any = None) -> list[dict[str, Any]]:
    """One run: a record per planned episode (its return, then the refitted model's measures)."""
    pyro.set_rng_seed(seed)
    pyro.clear_param_store()
    generator = torch.Generator().manual_seed(seed)
    env = make_env("CartPole-v1", max_episode_steps=s.steps)
    env.reset(seed=seed)
    limits = (float(env.unwrapped.x_threshold), float(env.unwrapped.theta_threshold_radians))
    data = Transitions(s.validation, generator)
    for _ in range(s.random_episodes):
        _episode(env, lambda _: int(torch.randint(2, (), generator=generator)), data)
    states, _, changes = data.tensors(held_out=False)
    scales = CartPoleScales(states, changes)
    model = DynamicsModel(5, 4, s.hidden, s.dropout, s.length_scale)
    guide = DropoutGuide(model, concrete=agent == "concrete")
    svi = CompiledSVI(model, guide, cast(Any, pyro.optim).Adam({"lr": s.lr}), DropoutELBO())
    records = []
    for k in range(s.episodes):
        _fit(svi, data, scales, s)
        record = {"episodes_seen": s.random_episodes + k, **_measure(model, guide, data, scales, s)}
        draw = poutine.trace(guide).get_trace(scales.inputs(states[:1], torch.zeros(1)))
        drawn = poutine.replay(model.change, trace=draw)
        choose = partial(plan, drawn, scales=scales, limits=limits, candidates=s.candidates,
                         horizon=s.horizon, generator=generator)  # fmt: skip
        record["return"] = _episode(env, choose, data)
        records.append(record)
        if bar is not None:
            bar.update()
    env.close()
    return records


def run_dynamics(s: DynamicsSettings, out: str | Path, progress: bool = True) -> dict[str, Any]:
    """Every (agent, repeat), resumed run by run from ``out/results.json``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    results = resume_runs(out, asdict(s), _WHICH)
    todo = missing_runs(results, s.agents, s.repeats, s.seed)
    bar = Progress(total=len(todo) * s.episodes, disable=not progress, desc="dynamics episodes")
    for agent, seed in todo:
        start = time.perf_counter()
        records = run_agent(agent, s, seed, bar)
        store_run(
            out,
            results,
            agent,
            seed,
            {"episodes": records, "seconds": round(time.perf_counter() - start, 1)},
        )
    bar.close()
    dynamics_figure(results, out / "dynamics.png")
    return results
