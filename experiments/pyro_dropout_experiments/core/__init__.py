"""What every experiment shares: options and flags, training, checkpoints, results and noise estimates."""

from .atomic import refuse_link, save_figure, write_atomically
from .checkpoint import Checkpoints, TrainingCheckpoint, read_checkpoint
from .command import (
    QUICK_BUDGET,
    Parser,
    add_run_flags,
    add_threads,
    check_device,
    check_out,
    command_settings,
    device_flag,
    device_scope,
    given_flags,
    int_list,
    positive_int,
    use_threads,
)
from .noise import held_out_tau, m_step_tau
from .options import add_flags, flatten, from_args, known_names, unflatten, unless_given, validate
from .out_lock import holding_out
from .results_file import (
    check_scores,
    command_name,
    missing_runs,
    naming_command,
    open_results,
    resume_runs,
    save_results,
    store_run,
)
from .splits import parse_splits
from .store import ResultStore, is_result_file, read_record, write_record
from .training import Standardiser, train_runs

__all__ = [
    "QUICK_BUDGET",
    "Checkpoints",
    "Parser",
    "ResultStore",
    "Standardiser",
    "TrainingCheckpoint",
    "add_flags",
    "add_run_flags",
    "add_threads",
    "check_device",
    "check_out",
    "check_scores",
    "command_name",
    "command_settings",
    "device_flag",
    "device_scope",
    "flatten",
    "from_args",
    "given_flags",
    "held_out_tau",
    "holding_out",
    "int_list",
    "is_result_file",
    "known_names",
    "m_step_tau",
    "missing_runs",
    "naming_command",
    "open_results",
    "parse_splits",
    "positive_int",
    "read_checkpoint",
    "read_record",
    "refuse_link",
    "resume_runs",
    "save_figure",
    "save_results",
    "store_run",
    "train_runs",
    "unflatten",
    "unless_given",
    "use_threads",
    "validate",
    "write_atomically",
    "write_record",
]
