"""The path of one call through the library's files: how many of its files a call visits, how often
it moves from one file to another, and how often it bounces back (A -> B -> A), for the first
``MCDropout(net).predict(x)`` on a 4-16-3 network with dropout, and a ``DropoutELBO`` step of the
quick start's model.

    python tools/call_path.py

Counts the library's own Python functions as they are entered (``sys.setprofile``), in order;
each entry names its file. A maintainer reads a call's path as that sequence.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]


def path_of(call: Callable[[], object], package: str) -> list[str]:
    """The library files whose functions ``call`` enters, in order (repeats kept)."""
    files: list[str] = []
    prefix = os.path.dirname(sys.modules[package].__file__ or "") + os.sep

    def profile(frame, event, arg):
        if event == "call" and frame.f_code.co_filename.startswith(prefix):
            files.append(frame.f_code.co_filename[len(prefix) :])

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return files


def counts(files: list[str]) -> dict[str, int]:
    """Distinct files, changes of file, and bounces (A -> B -> A) of a path."""
    moves = [f for i, f in enumerate(files) if i == 0 or f != files[i - 1]]
    bounces = sum(1 for i in range(2, len(moves)) if moves[i] == moves[i - 2])
    return {"files": len(set(files)), "changes": len(moves) - 1, "bounces": bounces}


def main() -> None:
    from torch import nn

    import pyro_dropout
    from pyro_dropout import MCDropout

    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Dropout(0.1), nn.Linear(16, 3)).eval()
    x = torch.randn(10, 4)
    bnn = MCDropout(net, "classification")
    first = counts(path_of(lambda: bnn.predict(x), pyro_dropout.__name__))
    print(f"MCDropout(net).predict(x), first call, 4-16-3 net: {first}")
    second = counts(path_of(lambda: bnn.predict(x), pyro_dropout.__name__))
    print(f"MCDropout(net).predict(x), second call: {second}")


if __name__ == "__main__":
    main()
