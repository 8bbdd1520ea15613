"""Data sets: loaders for the benchmark data (UCI regression with its standard splits)."""

from .uci import UCI_DATASETS, Split, UCIDataset, default_data_dir, download_uci, load_uci, uci_directory

__all__ = [
    "UCI_DATASETS",
    "Split",
    "UCIDataset",
    "default_data_dir",
    "download_uci",
    "load_uci",
    "uci_directory",
]
