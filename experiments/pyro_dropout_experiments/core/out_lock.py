"""One command at a time on an output folder: two runs given the same ``--out`` at once take turns.

A command's reads and writes of its folder (``results.json``: read what is kept, add, write
back) are one step only if nothing else writes between them, so :func:`holding_out` holds an
exclusive lock on the folder itself for the whole command. A second command on the same folder
says that it waits and starts when the first ends, and then finds its results (it adds beside
them, resumes, or is refused, as any rerun is). The lock is the operating system's (``flock``
on the folder): a run that is killed releases it, and no file is left behind. A folder made for
a command that wrote nothing (it stopped at its input checks) is removed again. Where ``fcntl``
is missing (Windows) the commands run without the lock.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["holding_out"]


@contextmanager
def holding_out(out: str | Path, command: str) -> Iterator[None]:
    """Hold ``out``'s lock while the block runs (the folder made where missing); wait, with a
    line on stderr, while another command holds it."""
    folder = Path(out)
    if fcntl is None:
        yield
        return
    made = not folder.exists()
    folder.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(
                f"pyro-dropout {command}: another run is writing to --out {out}; waiting for it to finish",
                file=sys.stderr,
                flush=True,
            )
            fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        if made:
            with suppress(OSError):  # not empty: the command wrote there
                folder.rmdir()
        os.close(descriptor)  # releases the lock
