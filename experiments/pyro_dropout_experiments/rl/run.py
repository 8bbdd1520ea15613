"""``pyro-dropout rl``: paper 000 §5.4's Q-network with dropout, Thompson sampling against
ε-greedy on a gymnasium task. Writes ``results.json`` after every run (a rerun resumes) and
``rl.png``."""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pyro
import torch

from ..core import missing_runs, resume_runs, store_run
from ..core.progress import Progress
from .agent import QAgent, Replay
from .figure import rl_figure
from .settings import RLSettings

__all__ = ["make_env", "play", "run_rl", "summary"]

# runs with these settings differing still belong together (which runs, not how each is run)
_WHICH = ("policies", "repeats")


def make_env(name: str, **kwargs: Any) -> Any:
    """A gymnasium environment (``kwargs`` go to ``gymnasium.make``), with a clear error where
    gymnasium or the task is missing."""
    try:
        import gymnasium
    except ImportError:
        raise ImportError("this command needs gymnasium: pip install 'pyro-dropout[rl]'") from None
    try:
        env = gymnasium.make(name, **kwargs)
    except gymnasium.error.Error as e:
        raise ValueError(f"--env: gymnasium has no task {name!r} ({e})") from None
    if not hasattr(env.action_space, "n") or len(env.observation_space.shape or ()) != 1:
        raise ValueError(f"--env: {name!r} needs discrete actions and a flat observation vector")
    return env


def play(policy: str, s: RLSettings, seed: int, bar: Any = None) -> list[list[float]]:
    """One run: ``[[batches trained when the episode ended, its return], ...]``."""
    pyro.set_rng_seed(seed)
    env = make_env(s.env)
    size, actions = env.observation_space.shape[0], int(env.action_space.n)
    agent, replay = QAgent(policy, size, actions, s, seed), Replay(s.buffer, size)
    observation, _ = env.reset(seed=seed)
    episodes, total = [], 0.0
    for step in range(s.burn_in + s.batches):
        state = torch.as_tensor(observation, dtype=torch.float32)
        action = agent.act(state)  # random until the agent's first batch: the burn-in
        observation, reward, terminal, truncated, _ = env.step(action)
        replay.add(state, action, float(reward), torch.as_tensor(observation, dtype=torch.float32), terminal)
        total += float(reward)
        if terminal or truncated:
            episodes.append([agent.batches, total])
            total, (observation, _) = 0.0, env.reset()
        if step >= s.burn_in:
            agent.learn(replay)
            if bar is not None:
                bar.update()
    env.close()
    return episodes


def summary(episodes: list[list[float]], batches: int, threshold: float = 195.0) -> dict[str, Any]:
    """The mean return of the episodes ending in the last fifth of the batches, and the batches
    until the mean return of the last ten episodes first reaches ``threshold`` (None: never)."""
    late = [r for b, r in episodes if b > 0.8 * batches]
    reached = None
    for i in range(10, len(episodes) + 1):
        if sum(r for _, r in episodes[i - 10 : i]) / 10 >= threshold:
            reached = int(episodes[i - 1][0])
            break
    return {"late_return": sum(late) / len(late) if late else None, "batches_to_threshold": reached}


def run_rl(s: RLSettings, out: str | Path, progress: bool = True) -> dict[str, Any]:
    """Every (policy, repeat), resumed run by run from ``out/results.json``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    results = resume_runs(out, asdict(s), _WHICH)
    todo = missing_runs(results, s.policies, s.repeats, s.seed)
    bar = Progress(total=len(todo) * s.batches, disable=not progress, desc="rl batches")
    for policy, seed in todo:
        start = time.perf_counter()
        episodes = play(policy, s, seed, bar)
        record = {"episodes": episodes, "seconds": round(time.perf_counter() - start, 1)}
        store_run(out, results, policy, seed, record | summary(episodes, s.batches))
    bar.close()
    rl_figure(results, out / "rl.png")
    return results
