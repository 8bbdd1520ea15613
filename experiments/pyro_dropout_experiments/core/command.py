"""What every ``pyro-dropout`` command shares: the parser whose errors are one line with the
closest match, the flags of a command that trains (``--out``, ``--quick``, ``--device``,
``--threads``, ``--quiet``), which flags were given, and the one ``--quick`` budget."""

from __future__ import annotations

import argparse
import contextlib
import difflib
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn, TypeVar

from .options import from_args, unless_given

__all__ = [
    "QUICK_BUDGET",
    "Parser",
    "add_run_flags",
    "add_threads",
    "check_device",
    "check_out",
    "command_settings",
    "device_flag",
    "device_scope",
    "given_flags",
    "int_list",
    "positive_int",
    "use_threads",
]

T = TypeVar("T")

# the one promise of every command's --quick setting, measured by tools/time_quick.py
QUICK_BUDGET = "under 10 minutes on 2 CPU cores"


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line (the command, the problem, the closest
    match of a misspelt choice and where the flags are listed) instead of the usage text."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)  # a flag is given by its full name: see given_flags
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        choice = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if choice:
            options = [c.strip(" '") for c in choice.group(2).split(",")]
            near = difflib.get_close_matches(choice.group(1), options, n=1, cutoff=0.5)
            hint = f"; did you mean '{near[0]}'?" if near else f" (choose from {', '.join(options)})"
            message = f"unknown {'command' if self._is_commands() else 'value'} '{choice.group(1)}'{hint}"
        self.exit(2, f"{self.prog}: error: {message} ({self.prog} --help: the flags)\n")

    def _is_commands(self) -> bool:
        return any(isinstance(a, argparse._SubParsersAction) for a in self._actions)

    def parse_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> Any:  # type: ignore[override]
        argv = list(sys.argv[1:] if args is None else args)
        parsed, extras = super().parse_known_args(argv, namespace)
        if extras:  # named by the command that was given, with the closest of its flags
            command = _chosen(self, parsed)[-1]
            flags = [o for action in command._actions for o in action.option_strings]
            near = difflib.get_close_matches(extras[0].split("=", 1)[0], flags, n=1, cutoff=0.6)
            hint = f"; did you mean '{near[0]}'?" if near else ""
            command.error(f"unknown argument '{extras[0]}'{hint}")
        parsed.given = given_flags(self, argv, parsed)
        return parsed


def _chosen(parser: argparse.ArgumentParser, parsed: argparse.Namespace) -> list[argparse.ArgumentParser]:
    """The parser and the subparsers that ``parsed`` went through."""
    chain = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            name = getattr(parsed, action.dest or "", None)
            if name in action.choices:
                chain += _chosen(action.choices[name], parsed)
    return chain


def given_flags(parser: argparse.ArgumentParser, argv: Sequence[str], parsed: argparse.Namespace) -> set[str]:
    """The destinations of the flags written on the command line, whatever their values: an
    explicit flag wins over ``--quick`` even where it equals the default."""
    written = {a.split("=", 1)[0] for a in argv if a.startswith("--")}
    return {
        action.dest
        for p in _chosen(parser, parsed)
        for action in p._actions
        if any(o in written for o in action.option_strings)
    }


def check_out(out: str | Path, flag: str = "--out") -> None:
    """Refuse, before any work, an output folder that cannot be one: a file, a link, a folder
    under a file, or a place this user cannot write. Nothing is created here."""
    if not str(out).strip():
        raise ValueError(f"{flag} is empty: give the folder to write to")
    path = Path(out)
    if path.is_symlink():
        raise ValueError(f"{flag} {path} is a symbolic link; give the folder it points to, or another")
    if path.exists() and not path.is_dir():
        raise ValueError(f"{flag} {path} is a file, not a folder")
    parent = next((p for p in [path, *path.absolute().parents] if p.exists() or p.is_symlink()), None)
    if parent is not None and not parent.is_dir():
        raise ValueError(f"{flag} {path}: {parent} is a file, not a folder")
    if parent is not None and not os.access(parent, os.W_OK | os.X_OK):
        raise ValueError(f"{flag} {path}: {parent} is not writable")


def int_list(text: str, minimum: int = 1) -> tuple[int, ...]:
    """A flag's comma-separated whole numbers (``"10,100,1000"``), each at least ``minimum``;
    an ``argparse`` error naming the text otherwise."""
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected whole numbers separated by commas, got {text!r}"
        ) from None
    if not values or min(values) < minimum:
        raise argparse.ArgumentTypeError(f"expected whole numbers of at least {minimum}, got {text!r}")
    return values


def positive_int(text: str) -> int:
    """A whole number >= 1 (argparse type)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {value}")
    return value


def check_device(device: str, where: str = "--device") -> None:
    """A clear error for a device this machine does not have (e.g. ``cuda`` without CUDA)."""
    import torch

    try:
        kind = torch.device(device).type
    except RuntimeError:
        raise ValueError(f"{where}: {device!r} is not a device (use cpu or cuda)") from None
    if kind not in ("cpu", "cuda"):
        raise ValueError(f"{where}: {device!r} is not supported (use cpu or cuda)")
    if kind == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"{where} {device!r}: CUDA is not available on this machine (use --device cpu)")


def device_flag(text: str) -> str:
    """``--device``'s type: the device, checked when parsed."""
    try:
        check_device(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def device_scope(device: str) -> contextlib.AbstractContextManager:
    """Where a command without a model-level ``device`` makes its tensors and networks: PyTorch's
    default device within the block (nothing changes on the CPU)."""
    if torch_device_type(device) == "cpu":
        return contextlib.nullcontext()
    import torch

    return torch.device(device)


def torch_device_type(device: str) -> str:
    import torch

    return torch.device(device).type


def add_threads(parser: Any) -> None:
    """The ``--threads`` flag: PyTorch's CPU threads for the command (see :func:`use_threads`)."""
    parser.add_argument(
        "--threads",
        type=positive_int,
        default=None,
        help="PyTorch's CPU threads (default: one per core); with other jobs on the machine give "
        "each job its share",
    )


def use_threads(args: argparse.Namespace) -> None:
    """Set PyTorch's CPU threads from ``--threads``, if given."""
    if getattr(args, "threads", None) is not None:
        import torch

        torch.set_num_threads(args.threads)


def add_run_flags(
    parser: Any, out: str, files: str, quick: str | None, device: bool = True, data: str | None = None
) -> None:
    """A command's common flags: ``--out`` (default ``out``, where ``files`` go), ``--quick``
    (``quick`` says what it changes; ``None``: the command has no quick setting), ``--device``
    (unless the command's settings hold it), ``--threads``, ``--quiet`` and ``--data-dir``
    (``data`` names the folders it reads; ``None``: the command reads no data)."""
    text = f"{files} go here (default {out}; {out}-quick with --quick)"
    parser.add_argument("--out", default=out, help=text)
    if data is not None:
        parser.add_argument(
            "--data-dir",
            default=None,
            help=f"folder holding {data} (default $PYRO_DROPOUT_DATA, else ../shared/data beside a "
            "source checkout, else ./data)",
        )
    if quick is not None:
        parser.add_argument("--quick", action="store_true", help=f"a first try, {QUICK_BUDGET}: {quick}")
    if device:
        parser.add_argument("--device", type=device_flag, default="cpu", help="cpu or cuda (default cpu)")
    add_threads(parser)
    parser.add_argument("--quiet", action="store_true", help="no progress bars")


def command_settings(cls: type[T], args: argparse.Namespace, quick: dict[str, Any], prefix: str = "") -> T:
    """A command's settings: ``cls`` from the flags, with ``quick``'s values under ``--quick`` for
    the settings whose flags were not given; PyTorch's threads set."""
    use_threads(args)
    settings = from_args(cls, args, prefix)
    if not getattr(args, "quick", False):
        return settings
    given = {d.removeprefix(f"{prefix}_") if prefix else d for d in getattr(args, "given", set())}
    return unless_given(settings, quick, given=given)
