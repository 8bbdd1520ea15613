"""Forecasting a series with a recurrent network under variational dropout."""

from .data import Increments, co2_increments
from .model import Forecaster
from .rollout import draw_trajectories, forecast_scores
from .run import run_forecast
from .settings import QUICK, ForecastSettings

__all__ = [
    "QUICK",
    "ForecastSettings",
    "Forecaster",
    "Increments",
    "co2_increments",
    "draw_trajectories",
    "forecast_scores",
    "run_forecast",
]
