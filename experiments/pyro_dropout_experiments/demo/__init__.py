"""The demo: MC dropout on built-in 1-d data, observed on two intervals."""

from .run import make_data, run_demo
from .settings import QUICK, DemoSettings

__all__ = ["QUICK", "DemoSettings", "make_data", "run_demo"]
