"""Data sets: one protocol (:class:`Dataset`: tensors, named splits, a task) and its loaders."""

from .base import Dataset, Split, Task, read_indices, read_scalar
from .download import download_co2, download_images, download_uci
from .images import IMAGE_SETS, ImageData, find_idx, load_images, read_idx
from .series import Series, linear_noise, load_co2, load_solar
from .synthetic import low_noise_regression, write_uci_folder
from .uci import UCI_DATASETS, available_uci, check_name, default_data_dir, load_uci, uci_directory

__all__ = [
    "IMAGE_SETS",
    "UCI_DATASETS",
    "Dataset",
    "ImageData",
    "Series",
    "Split",
    "Task",
    "available_uci",
    "check_name",
    "default_data_dir",
    "download_co2",
    "download_images",
    "download_uci",
    "find_idx",
    "linear_noise",
    "load_co2",
    "load_images",
    "load_solar",
    "load_uci",
    "low_noise_regression",
    "read_idx",
    "read_indices",
    "read_scalar",
    "uci_directory",
    "write_uci_folder",
]
