"""One-dimensional regression experiments: extrapolating CO2 and interpolating solar irradiance
(paper 000 §5.1, appendix D.1) and Concrete dropout against the data size (paper 001 §4.1)."""

from .co2 import CO2_EVERY, CO2_TRAIN_END, co2_data, run_co2
from .fit import Fitted, Predictive, fit_curves, gp_curve, mc_predictive, standard_predictive
from .models import RATES, fit_models
from .settings import QUICK, CurveSettings
from .solar import SOLAR_GAPS, run_solar, solar_data
from .synthetic import SIZES, run_synthetic

__all__ = [
    "CO2_EVERY",
    "CO2_TRAIN_END",
    "QUICK",
    "RATES",
    "SIZES",
    "SOLAR_GAPS",
    "CurveSettings",
    "Fitted",
    "Predictive",
    "co2_data",
    "fit_curves",
    "fit_models",
    "gp_curve",
    "mc_predictive",
    "run_co2",
    "run_solar",
    "run_synthetic",
    "solar_data",
    "standard_predictive",
]
