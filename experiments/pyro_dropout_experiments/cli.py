"""The ``pyro-dropout`` command: its subcommands and flags, built from the registered methods and
the options dataclasses (the one source of every default); values are checked when parsed."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["build_parser", "main", "parse_splits"]


def parse_splits(text: str) -> list[int]:
    """``"0-19"``, ``"3"`` or ``"0,2,5-7"`` -> split numbers (argparse type; see
    :func:`pyro_dropout_experiments.core.parse_splits`)."""
    from .core import parse_splits as parse

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


def _demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    run_demo(Path(args.out), steps=args.steps, num_samples=args.num_samples, seed=args.seed, loss=args.loss)
    return 0


def _uci(args: argparse.Namespace) -> int:
    import torch

    from .core import from_args
    from .uci import Settings, UCIBenchmark, get_method, method_class, run_uci

    cls, _ = method_class(args.method)
    settings = from_args(
        Settings,
        args,
        progress=not args.quiet,
        per_example_masks=args.masks == "example",
        retrain=args.final == "retrain",
    )
    method = get_method(args.method, from_args(cls.options_class, args, cls.prefix))
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    bench = UCIBenchmark.load(args.dataset, args.data_dir)
    results = run_uci(bench, method, args.splits, Path(args.out), settings)
    rmse = sum(r["rmse"] for r in results) / len(results)
    ll = sum(r["test_ll"] for r in results) / len(results)
    print(f"{bench.name} {args.method}: {len(results)} splits, mean RMSE {rmse:.3f}, mean test LL {ll:.3f}")
    return 0


def _uci_table(args: argparse.Namespace) -> int:
    from .uci import collect, markdown_table

    rows = collect(Path(args.results))
    print(markdown_table(rows), end="")
    if args.plot:
        from .uci import plot_uci

        Path(args.plot).parent.mkdir(parents=True, exist_ok=True)
        plot_uci(rows, args.metric).savefig(args.plot, dpi=120)
    if args.rates:
        from .uci import plot_learned_rates

        Path(args.rates).parent.mkdir(parents=True, exist_ok=True)
        plot_learned_rates(rows, args.rates_method).savefig(args.rates, dpi=110)
    return 0


def _uci_status(args: argparse.Namespace) -> int:
    from .uci import status

    folder = Path(args.results)
    if not folder.is_dir():
        raise FileNotFoundError(f"no results folder {folder}")
    lines = status(folder)
    print("\n".join(lines) if lines else f"{folder}: no training in progress, no grid search waiting")
    return 0


def _download(args: argparse.Namespace) -> int:
    from pyro_dropout.datasets import UCI_DATASETS, download_uci

    names = UCI_DATASETS if args.dataset == "all" else [args.dataset]
    for name in names:
        print(f"{name}: {download_uci(name, args.data_dir)}")
    return 0


def _add_demo(sub: argparse._SubParsersAction) -> None:
    from .core import positive_int

    demo = sub.add_parser("demo", help="train MC dropout on built-in 1-d data; print figures, write a plot")
    demo.add_argument("--out", default="results/demo", help="output directory (default: results/demo)")
    demo.add_argument("--steps", type=positive_int, default=3000, help="SVI steps (default 3000)")
    demo.add_argument(
        "--num-samples", type=positive_int, default=500, help="MC-dropout draws for the figures (default 500)"
    )
    demo.add_argument("--seed", type=int, default=0, help="seed of the data, weights and masks (default 0)")
    demo.add_argument(
        "--loss",
        choices=["elbo", "bbalpha"],
        default="elbo",
        help="DropoutELBO or BBAlpha(0.5) (default elbo)",
    )
    demo.set_defaults(func=_demo)


def _add_uci(sub: argparse._SubParsersAction) -> None:
    from .core import add_flags, add_threads
    from .uci import Settings, method_class, method_names

    names = method_names()
    summaries = "; ".join(f"{n}: {method_class(n)[1]['summary']}" for n in names)
    uci = sub.add_parser(
        "uci", help="the UCI regression benchmark on its standard splits", epilog=f"methods: {summaries}"
    )
    uci.add_argument(
        "--dataset", required=True, type=_dataset_name, help="e.g. bostonHousing (DATA_DIR/uci/NAME/)"
    )
    uci.add_argument("--method", required=True, choices=names)
    uci.add_argument("--splits", type=parse_splits, default=None, help="e.g. 0-19 (default: all)")
    uci.add_argument("--data-dir", default=None, help="folder holding uci/ (default: $PYRO_DROPOUT_DATA)")
    uci.add_argument("--out", default="results", help="one JSON file per split goes here (default: results)")
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
    seen: set[str] = set()
    for name in names:
        cls, _ = method_class(name)
        if cls.prefix and cls.prefix not in seen:
            seen.add(cls.prefix)
            add_flags(uci.add_argument_group(f"{cls.prefix} options"), cls.options_class, cls.prefix)
    uci.set_defaults(func=_uci)


_DESCRIPTION = "Dropout as approximate Bayesian inference in Pyro: the papers' experiments, one command each."
_EXAMPLES = """examples:
  pyro-dropout demo                                          MC dropout on built-in 1-d data
  pyro-dropout uci --dataset bostonHousing --method mc-dropout --out results/
  pyro-dropout uci-table results/ --plot uci.png
  pyro-dropout mnist ood --quick                             LeNet: OOD and misclassification detection
  pyro-dropout co2 --quick                                   paper 000 Figs. 2-3: extrapolating CO2
  pyro-dropout forecast --quick                              an LSTM with variational dropout on CO2
  pyro-dropout bandit --quick                                Thompson sampling with MC dropout
  pyro-dropout rl --quick                                    a DQN with dropout on CartPole (gymnasium)
  pyro-dropout dynamics --quick                              Concrete dropout in a cart-pole dynamics model
  pyro-dropout COMMAND --help                                the flags of one command"""


def _add_experiments(sub: argparse._SubParsersAction) -> None:
    """The paper experiments' commands, each from its package."""
    from .bandit.command import add_bandit
    from .curves.command import add_curves
    from .dynamics.command import add_dynamics
    from .forecast.command import add_forecast
    from .mnist.command import add_mnist
    from .rl.command import add_rl

    for add in (add_mnist, add_curves, add_forecast, add_bandit, add_rl, add_dynamics):
        add(sub)


def build_parser() -> argparse.ArgumentParser:
    from pyro_dropout import __version__

    parser = argparse.ArgumentParser(
        prog="pyro-dropout",
        description=_DESCRIPTION,
        epilog=_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"pyro-dropout {__version__}")
    parser.add_argument(
        "--verbose", action="store_true", help="on an error, the full traceback instead of one line"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    _add_demo(sub)
    _add_uci(sub)
    _add_experiments(sub)
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
        "--rates-method", default="concrete", help="whose rates --rates draws (default: concrete)"
    )
    table.set_defaults(func=_uci_table)
    progress = sub.add_parser(
        "uci-status", help="trainings in progress and grid searches waiting in a UCI folder"
    )
    progress.add_argument("results", help="the folder given to `pyro-dropout uci --out`")
    progress.set_defaults(func=_uci_status)
    download = sub.add_parser("download-uci", help="fetch the UCI data sets with their standard splits")
    download.add_argument("--dataset", default="all", type=lambda t: t if t == "all" else _dataset_name(t))
    download.add_argument("--data-dir", required=True)
    download.set_defaults(func=_download)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from pyro_dropout.runtime import tune_cpu_allocator

    tune_cpu_allocator()  # the commands train small networks for hours; see its docstring
    try:
        return int(args.func(args))
    except (FileNotFoundError, ValueError, ConnectionError) as e:  # bad input: one clear line
        if args.verbose:
            raise
        print(f"pyro-dropout {args.command}: error: {e} (--verbose: the traceback)", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
