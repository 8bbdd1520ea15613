"""Posterior prediction: MC-dropout draws in vectorised chunks (``predict``), the standard network
at the expected weights (``predict_standard``), draws from posterior samples
(``predict_from_samples``), and the draws with documented shapes (``Predictions``)."""

from .collect import DRAWS_PLATE
from .draws import Predictions
from .predictive import predict, predict_from_samples, predict_standard
from .recorded import explain_chunks

__all__ = [
    "DRAWS_PLATE",
    "Predictions",
    "explain_chunks",
    "predict",
    "predict_from_samples",
    "predict_standard",
]
