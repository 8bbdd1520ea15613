"""Contextual bandits: Thompson sampling with MC dropout on the wheel bandit."""

from .model import RewardModel
from .run import play, run_bandit
from .settings import POLICIES, QUICK, BanditSettings
from .wheel import WheelBandit, wheel_bandit

__all__ = [
    "POLICIES",
    "QUICK",
    "BanditSettings",
    "RewardModel",
    "WheelBandit",
    "play",
    "run_bandit",
    "wheel_bandit",
]
