"""The UCI regression benchmark: its methods (`Method`, named in `registry.BUILT_IN`), the protocol
that runs them (`Protocol`'s stages, `UCIProtocol`), its settings, its results table and figure."""

from .benchmark import load_results, run_uci
from .labels import Label, label, parse_label
from .method import AfterTraining, BuildContext, GridSetup, Method, NoOptions
from .plot import plot_uci
from .protocol import UCIProtocol, fit_and_validate, grid_setup, split_chunks
from .published import PUBLISHED, REFERENCE, SOURCES
from .rates import learned_rates, plot_learned_rates
from .registry import BUILT_IN, MethodEntry, get_method, method_class, method_names, register, unregister
from .resume import method_from_stored
from .runs import Built, Spec, build_runs, draws_per_chunk, stack_rows, train_and_score, training_key
from .settings import PublishedSetup, Settings, UCIBenchmark
from .stages import Protocol, select_best
from .status import status
from .summary import mean_se, summarise, verdict
from .table import collect, markdown_table

__all__ = [
    "BUILT_IN",
    "PUBLISHED",
    "REFERENCE",
    "SOURCES",
    "AfterTraining",
    "BuildContext",
    "Built",
    "GridSetup",
    "Label",
    "Method",
    "MethodEntry",
    "NoOptions",
    "Protocol",
    "PublishedSetup",
    "Settings",
    "Spec",
    "UCIBenchmark",
    "UCIProtocol",
    "build_runs",
    "collect",
    "draws_per_chunk",
    "fit_and_validate",
    "get_method",
    "grid_setup",
    "label",
    "learned_rates",
    "load_results",
    "markdown_table",
    "mean_se",
    "method_class",
    "method_from_stored",
    "method_names",
    "parse_label",
    "plot_learned_rates",
    "plot_uci",
    "register",
    "run_uci",
    "select_best",
    "split_chunks",
    "stack_rows",
    "status",
    "summarise",
    "train_and_score",
    "training_key",
    "unregister",
    "verdict",
]
