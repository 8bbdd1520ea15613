"""The MNIST experiments: OOD and misclassification detection, the rotated digit, Concrete rates."""

from .concrete_rates import run_concrete_rates
from .data import ImageSplits, load_splits
from .ood import run_ood
from .rotated import rotate, run_rotated
from .scores import method_scores
from .settings import QUICK, MnistSettings
from .table import ood_tables
from .training import train_classifier, train_lenet

__all__ = [
    "QUICK",
    "ImageSplits",
    "MnistSettings",
    "load_splits",
    "method_scores",
    "ood_tables",
    "rotate",
    "run_concrete_rates",
    "run_ood",
    "run_rotated",
    "train_classifier",
    "train_lenet",
]
