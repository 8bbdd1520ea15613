"""``pyro-dropout download NAME... --data-dir DIR``: each data set a command reads, fetched from its
public source and checked against its SHA-256, into the layout the commands read
(``DIR/uci/NAME/data/``, ``DIR/mnist/``, ``DIR/fashion-mnist/``, ``DIR/co2/co2.csv``)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

__all__ = ["SETS", "add_download"]

# each name, what reads it, and how to fetch it
SETS: dict[str, str] = {
    "uci": "uci (the seven UCI sets with their standard splits; or one, by its name)",
    "mnist": "mnist, active-learning",
    "fashion-mnist": "mnist ood (its first out-of-distribution set)",
    "co2": "co2, forecast (from an installed statsmodels, else statsmodels' repository)",
}
# what has no public source in the layout the commands read: where to put it by hand
BY_HAND = {
    "notmnist": "notmnist/: notMNIST_small's test letters as idx files (mnist ood's second set)",
    "solar": "solar/irradiance_data.txt: Lean (2004)'s reconstruction, NOAA paleoclimatology (solar)",
}


def _fetchers() -> dict[str, Callable[[Path], Any]]:
    from pyro_dropout.datasets import UCI_DATASETS, download_co2, download_images

    out: dict[str, Callable[[Path], Any]] = {
        "mnist": lambda d: download_images("mnist", d),
        "fashion-mnist": lambda d: download_images("fashion-mnist", d),
        "co2": download_co2,
    }
    for name in UCI_DATASETS:
        out[name] = partial(_uci, name)
    return out


def _uci(name: str, data_dir: Path) -> Path:
    from pyro_dropout.datasets import download_uci

    return download_uci(name, data_dir)


def _names(text: str) -> str:
    from pyro_dropout.datasets import UCI_DATASETS

    known = ["all", *SETS, *UCI_DATASETS]
    if text not in known:
        hint = f"; {BY_HAND[text]}" if text in BY_HAND else ""
        raise argparse.ArgumentTypeError(f"no download for {text!r}{hint}; known: {', '.join(known)}")
    return text


def _download(args: argparse.Namespace) -> int:
    from pyro_dropout.datasets import UCI_DATASETS

    wanted: list[str] = []
    for name in args.names:
        expanded = (
            [*SETS, *UCI_DATASETS] if name == "all" else list(UCI_DATASETS) if name == "uci" else [name]
        )
        wanted += [n for n in expanded if n != "uci" and n not in wanted]
    fetch = _fetchers()
    for name in wanted:
        print(f"{name}: {fetch[name](Path(args.data_dir))}", flush=True)
    print("by hand (no public source in this layout): " + "; ".join(BY_HAND.values()))
    return 0


def add_download(sub: argparse._SubParsersAction) -> None:
    epilog = "\n".join(f"  {k:14s} read by {v}" for k, v in SETS.items())
    download = sub.add_parser(
        "download",
        help="fetch the data sets the commands read (checksums verified)",
        epilog=f"names:\n{epilog}\n  all            every one of them\n",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    download.add_argument("names", nargs="+", type=_names, metavar="NAME", help="uci, mnist, ... or all")
    download.add_argument(
        "--data-dir", required=True, help="the folder to fill; give it to the commands as --data-dir"
    )
    download.set_defaults(func=_download)
