"""Export and plots: ArviZ conversion and matplotlib figures of the predictive."""

from .arviz import from_predictions, from_samples, mcmc_to_arviz, to_arviz
from .kfold import PSIS_K_LIMIT, fold_of, kfold, kfold_result, loo
from .plots import plot_regression, plot_reliability, plot_score_histograms, plot_softmax_scatter, pyplot
from .reloo import reloo, sampling_wrapper

__all__ = [
    "PSIS_K_LIMIT",
    "fold_of",
    "from_predictions",
    "from_samples",
    "kfold",
    "kfold_result",
    "loo",
    "mcmc_to_arviz",
    "plot_regression",
    "plot_reliability",
    "plot_score_histograms",
    "plot_softmax_scatter",
    "pyplot",
    "reloo",
    "sampling_wrapper",
    "to_arviz",
]
