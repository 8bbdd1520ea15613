"""The experiments' core: methods, options, protocols, training, checkpoints and the results store."""

from .checkpoint import Checkpoints, TrainingCheckpoint, read_checkpoint
from .method import (
    AfterTraining,
    BuildContext,
    GridSetup,
    Method,
    NoOptions,
    get_method,
    method_class,
    method_names,
    register,
    unregister,
)
from .options import (
    add_flags,
    add_run_flags,
    add_threads,
    flatten,
    from_args,
    int_list,
    positive_int,
    unflatten,
    unless_given,
    use_threads,
    validate,
)
from .protocol import Protocol, select_best
from .splits import parse_splits
from .store import (
    ResultStore,
    is_result_file,
    missing_runs,
    read_record,
    resume_runs,
    store_run,
    write_record,
)
from .training import Standardiser, train_runs

__all__ = [
    "AfterTraining",
    "BuildContext",
    "Checkpoints",
    "GridSetup",
    "Method",
    "NoOptions",
    "Protocol",
    "ResultStore",
    "Standardiser",
    "TrainingCheckpoint",
    "add_flags",
    "add_run_flags",
    "add_threads",
    "flatten",
    "from_args",
    "get_method",
    "int_list",
    "is_result_file",
    "method_class",
    "method_names",
    "missing_runs",
    "parse_splits",
    "positive_int",
    "read_checkpoint",
    "read_record",
    "register",
    "resume_runs",
    "select_best",
    "store_run",
    "train_runs",
    "unflatten",
    "unless_given",
    "unregister",
    "use_threads",
    "validate",
    "write_record",
]
