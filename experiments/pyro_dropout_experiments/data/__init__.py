"""``pyro-dropout download``: the data sets the reproductions read, fetched into one folder."""

from .command import SETS, add_download

__all__ = ["SETS", "add_download"]
