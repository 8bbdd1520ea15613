"""Export and plots: ArviZ conversion and matplotlib figures of the predictive."""

from .arviz import from_predictions, from_samples, mcmc_to_arviz, to_arviz
from .plots import plot_regression, plot_reliability, plot_score_histograms, plot_softmax_scatter, pyplot

__all__ = [
    "from_predictions",
    "from_samples",
    "mcmc_to_arviz",
    "plot_regression",
    "plot_reliability",
    "plot_score_histograms",
    "plot_softmax_scatter",
    "pyplot",
    "to_arviz",
]
