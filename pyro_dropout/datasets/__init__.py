"""Data sets: one protocol (:class:`Dataset`: tensors, named splits, a task) and its loaders."""

from .base import Dataset, Split, Task, read_indices, read_scalar
from .download import download_uci
from .uci import UCI_DATASETS, check_name, default_data_dir, load_uci, uci_directory

__all__ = [
    "UCI_DATASETS",
    "Dataset",
    "Split",
    "Task",
    "check_name",
    "default_data_dir",
    "download_uci",
    "load_uci",
    "read_indices",
    "read_scalar",
    "uci_directory",
]
