"""Follow one argument through the calls of a ``pyro-dropout`` command: every call whose arguments
hold an object of the given type, the files those calls enter, and how often each file is entered.
An entry is a call from a function of another file; the same call made again (a loop over splits
or ensemble members) is the same entry, and a call within one file, a return, or a method of the
object itself called on it, is none.

    python tools/walk.py uci Method -- uci --dataset tiny --method mc-dropout --data-dir D --out O
    python tools/walk.py "mnist ood" MnistSettings -- mnist ood --methods mc-dropout --data-dir D --out O

The walks of ``uci``'s method and ``mnist ood``'s settings are checked by
``tests/experiments/test_walks.py``: no file is entered more than twice.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = (ROOT / "pyro_dropout", ROOT / "experiments" / "pyro_dropout_experiments")


def _ours(filename: str) -> str | None:
    path = Path(filename)
    for package in PACKAGES:
        if path.is_relative_to(package):
            return str(path.relative_to(ROOT))
    return None


def _carries(frame: FrameType, kind: type) -> bool:
    """The call is handed an object of type ``kind`` (a method of that object, called on it as
    ``self``, is the object at work, not the argument passed on)."""
    code = frame.f_code
    names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
    return any(isinstance(frame.f_locals.get(n), kind) for n in names if n != "self")


def walk(run: Any, kind: type) -> list[tuple[str, str]]:
    """Run ``run()`` and return the calls (file, function) that enter a file of the packages with
    an argument of type ``kind``, in order."""
    entries: list[tuple[str, str]] = []
    seen: set[tuple[Any, ...]] = set()

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        here = _ours(frame.f_code.co_filename)
        if here is None or not _carries(frame, kind):
            return
        caller = frame.f_back
        source = (caller.f_code.co_filename, caller.f_code.co_name) if caller is not None else None
        edge = (source, here, frame.f_code.co_name)
        if (caller is None or _ours(caller.f_code.co_filename) != here) and edge not in seen:
            seen.add(edge)
            entries.append((here, frame.f_code.co_name))

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return entries


def entered(entries: Sequence[tuple[str, str]]) -> Counter:
    """How many times each file is entered."""
    return Counter(f for f, _ in entries)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", help="what the walk is called in the printout")
    parser.add_argument("kind", help="the type to follow: Method (uci) or MnistSettings (mnist)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the pyro-dropout command line")
    args = parser.parse_args(argv)
    from pyro_dropout_experiments.cli import main as command
    from pyro_dropout_experiments.mnist import MnistSettings
    from pyro_dropout_experiments.uci import Method

    kind = {"Method": Method, "MnistSettings": MnistSettings}[args.kind]
    line = [a for a in args.command if a != "--"]
    entries = walk(lambda: command(line), kind)
    for f, fn in entries:
        print(f"  {f}: {fn}")
    counts = entered(entries)
    print(
        f"{args.name}: {len(entries)} entries in {len(counts)} files; most entered: {counts.most_common(3)}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
