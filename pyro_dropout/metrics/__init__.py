"""Predictive summaries and scores: regression, classification, calibration, OOD detection."""

from .acquisition import (
    ACQUISITIONS,
    acquisition_scores,
    bald,
    check_acquisition,
    epistemic_variance,
    max_entropy,
    mean_std,
    random_scores,
    variation_ratios,
)
from .batch_bald import batch_bald, joint_entropy
from .calibration import adaptive_ece, aurc, classwise_ece, fit_temperature, risk_coverage
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
from .conformal import conformal_interval, conformal_quantile, conformal_set
from .evaluate import evaluate
from .in_between import InBetween, gap_points, in_between
from .merge import merge_reports
from .ranking import aupr, auroc, average_ranks, fpr_at_tpr
from .regression import (
    coverage,
    crps,
    gaussian_log_likelihood,
    miscalibration_area,
    miscalibration_area_from_pit,
    pit,
    rmse,
)
from .reports import (
    ClassificationReport,
    RegressionReport,
    classification_report,
    ood_detection,
    regression_report,
    uncertainty_scores,
)
from .streaming import CategoricalScores, GaussianMixtureScores, LogMeanExp, RunScores, score_gaussian_draws

__all__ = [
    "ACQUISITIONS",
    "CategoricalScores",
    "ClassificationReport",
    "GaussianMixtureScores",
    "InBetween",
    "LogMeanExp",
    "RegressionReport",
    "ReliabilityDiagram",
    "RunScores",
    "accuracy",
    "acquisition_scores",
    "adaptive_ece",
    "aupr",
    "aurc",
    "auroc",
    "average_ranks",
    "bald",
    "batch_bald",
    "brier_score",
    "check_acquisition",
    "classification_report",
    "classwise_ece",
    "conformal_interval",
    "conformal_quantile",
    "conformal_set",
    "coverage",
    "crps",
    "entropy",
    "epistemic_variance",
    "evaluate",
    "expected_calibration_error",
    "fit_temperature",
    "fpr_at_tpr",
    "gap_points",
    "gaussian_log_likelihood",
    "in_between",
    "joint_entropy",
    "max_entropy",
    "mean_std",
    "merge_reports",
    "miscalibration_area",
    "miscalibration_area_from_pit",
    "mutual_information",
    "negative_log_likelihood",
    "ood_detection",
    "pit",
    "predictive_entropy",
    "random_scores",
    "regression_report",
    "reliability_diagram",
    "risk_coverage",
    "rmse",
    "score_gaussian_draws",
    "uncertainty_scores",
    "variation_ratio",
    "variation_ratios",
]
