"""Writes that a stop cannot leave half done and that never follow a link: every file a command
writes goes to a temporary file in the same folder and then ``os.replace``."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyro_dropout.runtime import file_mode

__all__ = ["refuse_link", "replace_atomically", "save_figure", "write_atomically"]


def refuse_link(path: Path) -> None:
    """An error naming ``path`` if it is a symbolic link (results are not written through one)."""
    if Path(path).is_symlink():
        raise ValueError(f"{path} is a symbolic link; results are not written through links: remove it")


def replace_atomically(path: Path, write: Callable[[Path], Any]) -> None:
    """``write(temporary)`` then ``os.replace(temporary, path)``: a stop leaves the old file whole,
    and a link at ``path`` is refused, not followed."""
    path = Path(path)
    refuse_link(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, name = tempfile.mkstemp(
        prefix=f".{path.stem}.", suffix=f".partial{path.suffix}", dir=path.parent
    )
    os.fchmod(descriptor, file_mode())  # the umask's mode, not mkstemp's 0600
    os.close(descriptor)
    temporary = Path(name)
    try:
        write(temporary)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def write_atomically(path: Path, text: str) -> None:
    """``text`` into ``path``, atomically (:func:`replace_atomically`)."""
    replace_atomically(path, lambda temporary: temporary.write_text(text))


def save_figure(fig: Any, path: Path, **savefig: Any) -> None:
    """A matplotlib figure into ``path`` (its format from the suffix), atomically."""
    fmt = Path(path).suffix.lstrip(".") or None
    replace_atomically(path, lambda temporary: fig.savefig(temporary, format=fmt, **savefig))
