"""Model-based RL: Concrete dropout in a cart-pole dynamics model as episodes accumulate."""

from .model import DynamicsModel
from .planner import CartPoleScales, plan
from .run import Transitions, run_agent, run_dynamics
from .settings import AGENTS, QUICK, DynamicsSettings

__all__ = [
    "AGENTS",
    "QUICK",
    "CartPoleScales",
    "DynamicsModel",
    "DynamicsSettings",
    "Transitions",
    "plan",
    "run_agent",
    "run_dynamics",
]
