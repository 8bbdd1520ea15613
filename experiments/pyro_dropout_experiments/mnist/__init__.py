"""The MNIST experiments: OOD and misclassification detection, the rotated digit, Concrete rates,
BB-α on an MLP and a CNN, and adversarial examples."""

from .adversarial import run_adversarial
from .alpha_settings import ATTACK_QUICK, BBALPHA_QUICK, AlphaSettings, AttackSettings
from .alpha_training import alpha_loss, train_with_alpha
from .attack_scores import targeted_attack, untargeted_attack
from .bbalpha import run_bbalpha
from .concrete_rates import run_concrete_rates
from .data import ImageSplits, load_splits
from .ood import run_ood
from .probs import mc_probs
from .rotated import rotate, run_rotated
from .scores import method_scores
from .settings import OOD_QUICK, QUICK, MnistSettings
from .table import ood_tables
from .training import train_classifier, train_lenet, train_with_settings

__all__ = [
    "ATTACK_QUICK",
    "BBALPHA_QUICK",
    "OOD_QUICK",
    "QUICK",
    "AlphaSettings",
    "AttackSettings",
    "ImageSplits",
    "MnistSettings",
    "alpha_loss",
    "load_splits",
    "mc_probs",
    "method_scores",
    "ood_tables",
    "rotate",
    "run_adversarial",
    "run_bbalpha",
    "run_concrete_rates",
    "run_ood",
    "run_rotated",
    "targeted_attack",
    "train_classifier",
    "train_lenet",
    "train_with_alpha",
    "train_with_settings",
    "untargeted_attack",
]
