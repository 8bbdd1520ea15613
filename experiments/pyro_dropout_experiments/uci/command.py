"""``pyro-dropout uci``, ``uci-table``, ``uci-status`` and ``download-uci``: their flags, from
:class:`Settings` and each method's options; a method's module is imported only when ``uci``
itself is parsed (``with_methods``)."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..core import QUICK_BUDGET, add_flags, add_threads, check_out, from_args, refuse_link, save_figure
from .registry import BUILT_IN, method_class, method_names
from .settings import Settings

__all__ = ["QUICK", "add_download_uci", "add_uci", "add_uci_status", "add_uci_table", "parse_splits"]

# what --quick changes: a tenth of the epochs, fewer draws, three splits (Boston: about 3 minutes
# a method on 2 CPU cores; the larger data sets take longer in proportion to their rows)
QUICK: dict[str, Any] = {"epochs_multiplier": 10, "num_samples": 1000, "validation_samples": 200}
QUICK_SPLITS = (0, 1, 2)


def parse_splits(text: str) -> list[int]:
    """``"0-19"``, ``"3"`` or ``"0,2,5-7"`` -> split numbers (argparse type)."""
    from ..core import parse_splits as parse

    try:
        return parse(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _dataset_name(text: str) -> str:
    from pyro_dropout.datasets import check_name

    try:
        check_name(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def _settings_and_method(args: argparse.Namespace) -> tuple[Settings, Any]:
    from ..core import command_settings
    from .registry import get_method

    masks = {"per_example_masks": args.masks == "example", "retrain": args.final == "retrain"}
    settings = replace(command_settings(Settings, args, QUICK), progress=not args.quiet, **masks)
    cls, _ = method_class(args.method)
    return settings, get_method(args.method, from_args(cls.options_class, args, cls.prefix))


def _uci(args: argparse.Namespace) -> int:
    from pyro_dropout.datasets import default_data_dir

    from .benchmark import run_uci
    from .settings import UCIBenchmark

    settings, method = _settings_and_method(args)
    if args.data_dir is None:
        print(f"data: {default_data_dir()} (no --data-dir given; $PYRO_DROPOUT_DATA, else the default)")
    bench = UCIBenchmark.load(args.dataset, args.data_dir)
    splits = args.splits if args.splits is not None or not args.quick else list(QUICK_SPLITS)
    results = run_uci(bench, method, splits, Path(args.out), settings)
    rmse = sum(r["rmse"] for r in results) / len(results)
    ll = sum(r["test_ll"] for r in results) / len(results)
    print(f"{bench.name} {args.method}: {len(results)} splits, mean RMSE {rmse:.3f}, mean test LL {ll:.3f}")
    return 0


_DATA_HELP = (
    "folder holding uci/ (default: $PYRO_DROPOUT_DATA, else ../shared/data beside a source checkout, "
    "else ./data)"
)
_OUT_HELP = "one JSON file per split goes here (default results/uci; results/uci-quick with --quick)"


def add_uci(sub: argparse._SubParsersAction, with_methods: bool = True) -> None:
    """The ``uci`` command; ``with_methods``: add each method's own flags (imports the methods)."""
    summaries = "; ".join(f"{e.name}: {e.summary}" for e in BUILT_IN)
    uci = sub.add_parser(
        "uci", help="the UCI regression benchmark on its standard splits", epilog=f"methods: {summaries}"
    )
    uci.add_argument(
        "--dataset", required=True, type=_dataset_name, help="e.g. bostonHousing (DATA_DIR/uci/NAME/)"
    )
    uci.add_argument(
        "--method", required=True, choices=method_names(), help="how the network is fitted (below)"
    )
    uci.add_argument("--splits", type=parse_splits, default=None, help="e.g. 0-19 (default: all)")
    uci.add_argument("--data-dir", default=None, help=_DATA_HELP)
    uci.add_argument("--out", default="results/uci", help=_OUT_HELP)
    uci.add_argument(
        "--quick",
        action="store_true",
        help=f"a first try, {QUICK_BUDGET} on bostonHousing: {QUICK}, splits "
        f"{','.join(map(str, QUICK_SPLITS))} unless given (stored with those settings)",
    )
    uci.add_argument(
        "--masks",
        choices=("example", "draw"),
        default="example",
        help="the dropout methods' training masks: one per example, as the published code "
        "(default), or one per function draw (results labelled METHOD-per-draw)",
    )
    uci.add_argument(
        "--final",
        choices=("retrain", "grid-network"),
        default="retrain",
        help="what the test rows score: the chosen grid point retrained on the whole training "
        "split (default), or the grid network validation chose, as the published code does "
        "(results labelled METHOD-grid-network)",
    )
    add_threads(uci)
    uci.add_argument("--quiet", action="store_true", help="no progress bars")
    add_flags(uci.add_argument_group("protocol settings"), Settings)
    if with_methods:
        _add_method_flags(uci)
    uci.set_defaults(
        func=_uci, resume="the splits that finished are kept in --out; run the same command to resume"
    )


def _add_method_flags(uci: argparse.ArgumentParser) -> None:
    seen: set[str] = set()
    for name in method_names():
        cls, _ = method_class(name)
        if cls.prefix and cls.prefix not in seen:
            seen.add(cls.prefix)
            add_flags(uci.add_argument_group(f"{cls.prefix} options"), cls.options_class, cls.prefix)


def _uci_table(args: argparse.Namespace) -> int:
    from .plot import plot_uci
    from .rates import plot_learned_rates
    from .table import collect, markdown_table

    for flag in ("plot", "rates"):  # a figure that cannot be written is refused before the work
        if getattr(args, flag):
            check_out(Path(getattr(args, flag)).parent, f"--{flag}'s folder")
            refuse_link(Path(getattr(args, flag)))
    rows = collect(Path(args.results))
    print(markdown_table(rows), end="")
    if args.plot:
        save_figure(plot_uci(rows, args.metric), Path(args.plot), dpi=120)
    if args.rates:
        save_figure(plot_learned_rates(rows, args.rates_method), Path(args.rates), dpi=110)
    return 0


def add_uci_table(sub: argparse._SubParsersAction) -> None:
    table = sub.add_parser(
        "uci-table", help="markdown table of the UCI results next to the published numbers"
    )
    table.add_argument("results", help="the folder given to `pyro-dropout uci --out`")
    table.add_argument("--plot", default=None, help="also write a figure of the results here (e.g. uci.png)")
    table.add_argument("--metric", choices=["test_ll", "rmse"], default="test_ll", help="the figure's metric")
    table.add_argument(
        "--rates",
        default=None,
        help="also write a figure of the learned dropout rates per layer and split here",
    )
    table.add_argument(
        "--rates-method", default="concrete", help="whose rates --rates draws (default concrete)"
    )
    table.set_defaults(func=_uci_table)


def _uci_status(args: argparse.Namespace) -> int:
    from .status import status

    folder = Path(args.results)
    if not folder.is_dir():
        raise FileNotFoundError(f"no results folder {folder}")
    lines = status(folder)
    print("\n".join(lines) if lines else f"{folder}: no training in progress, no grid search waiting")
    return 0


def add_uci_status(sub: argparse._SubParsersAction) -> None:
    status = sub.add_parser(
        "uci-status", help="trainings in progress and grid searches waiting in a UCI folder"
    )
    status.add_argument("results", help="the folder given to `pyro-dropout uci --out`")
    status.set_defaults(func=_uci_status)


def _download(args: argparse.Namespace) -> int:
    from pyro_dropout.datasets import UCI_DATASETS, download_uci

    names = UCI_DATASETS if args.dataset == "all" else [args.dataset]
    for name in names:
        print(f"{name}: {download_uci(name, args.data_dir)}")
    return 0


def add_download_uci(sub: argparse._SubParsersAction) -> None:
    download = sub.add_parser("download-uci", help="fetch the UCI data sets with their standard splits")
    download.add_argument(
        "--dataset",
        default="all",
        type=lambda t: t if t == "all" else _dataset_name(t),
        help="one data set, e.g. bostonHousing (default all seven)",
    )
    download.add_argument("--data-dir", required=True, help="the files go to DATA_DIR/uci/NAME/data/")
    download.set_defaults(func=_download)
