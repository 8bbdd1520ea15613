"""The UCI regression benchmark: the protocol, its settings, its results table and figure."""

from .benchmark import load_results, run_uci
from .labels import Label, label, parse_label
from .plot import plot_uci
from .protocol import UCIProtocol, fit_and_validate, grid_setup, split_chunks
from .published import PUBLISHED, REFERENCE, SOURCES
from .rates import learned_rates, plot_learned_rates
from .resume import method_from_stored
from .runs import Built, Spec, build_runs, draws_per_chunk, stack_rows, train_and_score, training_key
from .settings import PublishedSetup, Settings, UCIBenchmark
from .status import status
from .summary import mean_se, summarise, verdict
from .table import collect, markdown_table

__all__ = [
    "PUBLISHED",
    "REFERENCE",
    "SOURCES",
    "Built",
    "Label",
    "PublishedSetup",
    "Settings",
    "Spec",
    "UCIBenchmark",
    "UCIProtocol",
    "build_runs",
    "collect",
    "draws_per_chunk",
    "fit_and_validate",
    "grid_setup",
    "label",
    "learned_rates",
    "load_results",
    "markdown_table",
    "mean_se",
    "method_from_stored",
    "parse_label",
    "plot_learned_rates",
    "plot_uci",
    "run_uci",
    "split_chunks",
    "stack_rows",
    "status",
    "summarise",
    "train_and_score",
    "training_key",
    "verdict",
]
