"""Reinforcement learning: a DQN with a dropout Q-network, Thompson sampling against ε-greedy."""

from .agent import QAgent, Replay
from .run import make_env, play, run_rl, summary
from .settings import POLICIES, QUICK, RLSettings

__all__ = ["POLICIES", "QUICK", "QAgent", "RLSettings", "Replay", "make_env", "play", "run_rl", "summary"]
