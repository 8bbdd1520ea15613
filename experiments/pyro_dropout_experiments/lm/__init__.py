"""Language models: MC dropout on a LoRA-fine-tuned character-level transformer
(``pyro-dropout lm-uncertainty``)."""

from .corpus import DOMAINS, VOCABULARY, Domain, docstrings, sequences, shuffled
from .figure import lm_figure, lm_table
from .model import CharLM, pretrain
from .run import Corpus, ensemble_members, run_ensemble, run_lm, run_variant
from .settings import QUICK, VARIANTS, LMSettings

__all__ = [
    "DOMAINS",
    "QUICK",
    "VARIANTS",
    "VOCABULARY",
    "CharLM",
    "Corpus",
    "Domain",
    "LMSettings",
    "docstrings",
    "ensemble_members",
    "lm_figure",
    "lm_table",
    "pretrain",
    "run_ensemble",
    "run_lm",
    "run_variant",
    "sequences",
    "shuffled",
]
