"""Predictive summaries and scores: regression, classification, calibration, OOD detection."""

from .classification import (
    ReliabilityDiagram,
    accuracy,
    brier_score,
    entropy,
    expected_calibration_error,
    mutual_information,
    negative_log_likelihood,
    predictive_entropy,
    reliability_diagram,
    variation_ratio,
)
from .ranking import aupr, auroc, average_ranks
from .regression import coverage, crps, gaussian_log_likelihood, miscalibration_area, pit, rmse
from .reports import (
    ClassificationReport,
    RegressionReport,
    classification_report,
    evaluate,
    ood_detection,
    regression_report,
    uncertainty_scores,
)

__all__ = [
    "ClassificationReport",
    "RegressionReport",
    "ReliabilityDiagram",
    "accuracy",
    "aupr",
    "auroc",
    "average_ranks",
    "brier_score",
    "classification_report",
    "coverage",
    "crps",
    "entropy",
    "evaluate",
    "expected_calibration_error",
    "gaussian_log_likelihood",
    "miscalibration_area",
    "mutual_information",
    "negative_log_likelihood",
    "ood_detection",
    "pit",
    "predictive_entropy",
    "regression_report",
    "reliability_diagram",
    "rmse",
    "uncertainty_scores",
    "variation_ratio",
]
