"""The ``pyro-dropout`` command: one ``add_*`` call per subcommand, each from its experiment's
``command.py``, and what every command shares: one-line errors (``--verbose``: the traceback),
one line on Ctrl-C saying how to resume, and the files it wrote, printed at the end."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from .active.command import add_active
from .bandit.command import add_bandit
from .core import Parser, check_out, holding_out, naming_command
from .curves.command import add_co2, add_solar, add_synthetic
from .data import add_download
from .demo.command import add_demo
from .dynamics.command import add_dynamics
from .forecast.command import add_forecast
from .lm.command import add_lm
from .mnist.command import add_mnist
from .rl.command import add_rl
from .uci.command import add_download_uci, add_uci, add_uci_status, add_uci_table, parse_splits

__all__ = ["build_parser", "main", "out_folder", "parse_splits"]

_DESCRIPTION = "Dropout as approximate Bayesian inference in Pyro: the papers' experiments, one command each."
_EXAMPLES = """examples:
  pyro-dropout demo                                          MC dropout on built-in 1-d data
  pyro-dropout uci --dataset bostonHousing --method mc-dropout --quick
  pyro-dropout uci-table results/uci --plot uci.png
  pyro-dropout mnist ood --quick                             LeNet: OOD and misclassification detection
  pyro-dropout co2 --quick                                   paper 000 Figs. 2-3: extrapolating CO2
  pyro-dropout forecast --quick                              an LSTM with variational dropout on CO2
  pyro-dropout bandit --quick                                Thompson sampling with MC dropout
  pyro-dropout rl --quick                                    a DQN with dropout on CartPole (gymnasium)
  pyro-dropout dynamics --quick                              Concrete dropout in a cart-pole dynamics model
  pyro-dropout active-learning --quick                       MNIST images acquired by BALD and others
  pyro-dropout lm-uncertainty --quick                        MC dropout on a LoRA-fine-tuned language model
  pyro-dropout COMMAND --help                                the flags of one command"""


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every subcommand; ``command``: the one about to run (``None``: all in full),
    so that ``pyro-dropout --help`` imports no UCI method."""
    from pyro_dropout import __version__

    parser = Parser(
        prog="pyro-dropout",
        description=_DESCRIPTION,
        epilog=_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"pyro-dropout {__version__}")
    parser.add_argument(
        "--verbose", action="store_true", help="on an error, the full traceback instead of one line"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_demo(sub)
    add_uci(sub, with_methods=command in (None, "uci"))
    add_uci_table(sub)
    add_uci_status(sub)
    add_download_uci(sub)
    add_download(sub)
    add_mnist(sub)
    add_co2(sub)
    add_solar(sub)
    add_synthetic(sub)
    add_forecast(sub)
    add_bandit(sub)
    add_rl(sub)
    add_dynamics(sub)
    add_active(sub)
    add_lm(sub)
    return parser


def _command_of(argv: Sequence[str]) -> str:
    """The subcommand named in ``argv`` (its first word that is not a flag), or ``""``."""
    return next((a for a in argv if not a.startswith("-")), "")


def _report_written(out: Path, since: float) -> None:
    """Print the files under ``out`` that this run wrote (a long list: its count and first ones)."""
    if not out.is_dir() or out.is_symlink():
        return
    files = sorted(
        Path(root, f)
        for root, _, names in os.walk(out)  # links to folders are not followed
        for f in names
        if not Path(root, f).is_symlink() and Path(root, f).stat().st_mtime >= since
    )
    if files:
        shown = ", ".join(str(p) for p in files[:4]) + (
            f" and {len(files) - 4} more" if len(files) > 4 else ""
        )
        print(f"wrote {len(files)} file{'s' * (len(files) > 1)} in {out}: {shown}")


def out_folder(args: argparse.Namespace) -> str | None:
    """Where a command writes: ``--out`` as given, else its default, with ``-quick`` under
    ``--quick`` (a first try never meets the full run's results)."""
    out = getattr(args, "out", None)
    if out and getattr(args, "quick", False) and "out" not in getattr(args, "given", set()):
        return f"{out}-quick"
    return out


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser(_command_of(argv)).parse_args(argv)
    from pyro_dropout.runtime import tune_cpu_allocator

    tune_cpu_allocator()  # the commands train small networks for hours; see its docstring
    name = " ".join(filter(None, [args.command, getattr(args, "experiment", None)]))
    start = time.time() - 1.0  # file times have a coarse clock on some file systems
    args.out = out_folder(args)
    try:
        out = getattr(args, "out", None)
        if out is not None:
            check_out(out)
        with naming_command(name), holding_out(out, name) if out else contextlib.nullcontext():
            code = int(args.func(args))
    except KeyboardInterrupt:
        print(
            f"\npyro-dropout {name}: stopped; {getattr(args, 'resume', 'rerun the command to start again')}",
            file=sys.stderr,
        )
        return 130
    except Exception as e:  # bad input, a bad folder, a device: one clear line
        if args.verbose:
            raise
        kind = "" if isinstance(e, ValueError | FileNotFoundError) else f"{type(e).__name__}: "
        message = " ".join(str(e).split()) or repr(e)
        print(f"pyro-dropout {name}: error: {kind}{message} (--verbose: the traceback)", file=sys.stderr)
        return 2
    if getattr(args, "out", None):
        _report_written(Path(args.out), start)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
