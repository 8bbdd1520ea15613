"""Running a ``pyro-dropout`` command as a probe: a command ends in one line on stderr and exit
status 2 when it refuses; here that line becomes a ValueError (a RuntimeError where it names an
exception type other than ValueError, as a raw traceback would), so that the probes classify it
as they do the library's errors."""

from __future__ import annotations

import contextlib
import io
from typing import Any

from pyro_dropout_experiments.cli import main

RAW = ("KeyError", "IndexError", "ZeroDivisionError", "RuntimeError", "AttributeError", "OverflowError")
MNIST_TINY = ["--epochs", "1", "--validation", "20", "--batch-size", "20", "--test-size", "30", "--quiet"]
MNIST_SMALL = [*MNIST_TINY, "--train-size", "200"]  # the real data, a little of it
CURVE_TINY = ["--width", "8", "--layers", "2", "--steps", "20", "--num-samples", "10", "--gp-steps", "20"]


def cli(argv: list[str]) -> int:
    """Run ``pyro-dropout ARGV``: its exit status where it ran, its one line as an exception
    where it refused."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main([*argv, "--quiet"] if "--quiet" not in argv and _takes_quiet(argv) else argv)
        except SystemExit as stop:  # argparse refused
            code = int(stop.code or 0)
    line = err.getvalue().strip()
    if code == 0:
        return 0
    if code == 2 and any(f"error: {raw}" in line for raw in RAW):
        raise RuntimeError(line)
    if code == 2:
        raise ValueError(line)
    raise RuntimeError(f"exit status {code}: {line[-300:]}")


def _takes_quiet(argv: list[str]) -> bool:
    return argv[0] not in ("uci-status", "uci-table", "download-uci")


def refused(code: Any) -> bool:
    """A probe that expects a refusal: a run to the end is silently wrong."""
    return False
