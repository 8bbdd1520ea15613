"""The ``pyro-dropout`` command."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["main"]


def _demo(args: argparse.Namespace) -> int:
    from .experiments.demo import run_demo

    run_demo(
        Path(args.out),
        steps=args.steps,
        num_samples=args.num_samples,
        seed=args.seed,
        loss=args.loss,
    )
    return 0


def parse_splits(text: str) -> list[int]:
    """``"0-19"``, ``"3"`` or ``"0,2,5-7"`` -> split numbers."""
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            raise argparse.ArgumentTypeError(f"bad --splits {text!r}: use e.g. 0-19, 3 or 0,2,5-7")
        out += list(range(int(lo), int(hi or lo) + 1))
    return out


def _uci(args: argparse.Namespace) -> int:
    import torch

    from .datasets import load_uci
    from .experiments.uci import Settings, run_uci

    if args.threads is not None:
        if args.threads < 1:
            raise ValueError(f"--threads must be at least 1, got {args.threads}")
        torch.set_num_threads(args.threads)
    data = load_uci(args.dataset, args.data_dir)
    settings = Settings(
        epochs_multiplier=args.epochs_multiplier,
        num_samples=args.num_samples,
        validation_samples=args.validation_samples,
        seed=args.seed,
        device=args.device,
        progress=not args.quiet,
        per_example_masks=args.masks == "example",
        init=args.init,
        hidden_layers=args.hidden_layers,
        retrain=args.final == "retrain",
        concrete_tau=args.concrete_tau,
        concrete_tau_init=args.concrete_tau_init,
    )
    results = run_uci(data, args.method, args.splits, Path(args.out), settings)
    done = [r for r in results if r is not None]
    rmse = sum(r["rmse"] for r in done) / len(done)
    ll = sum(r["test_ll"] for r in done) / len(done)
    print(f"{data.name} {args.method}: {len(done)} splits, mean RMSE {rmse:.3f}, mean test LL {ll:.3f}")
    return 0


def _uci_table(args: argparse.Namespace) -> int:
    from .experiments.uci_table import collect, markdown_table

    rows = collect(Path(args.results))
    print(markdown_table(rows), end="")
    if args.plot:
        from .experiments.uci_plot import plot_uci

        Path(args.plot).parent.mkdir(parents=True, exist_ok=True)
        plot_uci(rows, args.metric).savefig(args.plot, dpi=120)
    return 0


def _uci_status(args: argparse.Namespace) -> int:
    from .experiments.uci import status

    folder = Path(args.results)
    if not folder.is_dir():
        raise FileNotFoundError(f"no results folder {folder}")
    lines = status(folder)
    print("\n".join(lines) if lines else f"{folder}: no training in progress, no grid search waiting")
    return 0


def _download(args: argparse.Namespace) -> int:
    from .datasets import UCI_DATASETS, download_uci

    names = UCI_DATASETS if args.dataset == "all" else [args.dataset]
    for name in names:
        print(f"{name}: {download_uci(name, args.data_dir)}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pyro-dropout", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="train MC dropout on built-in 1-d data; print figures, write a plot")
    demo.add_argument("--out", default="results/demo", help="output directory (default: results/demo)")
    demo.add_argument("--steps", type=int, default=3000)
    demo.add_argument("--num-samples", type=int, default=500)
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--loss", choices=["elbo", "bbalpha"], default="elbo")
    demo.set_defaults(func=_demo)

    from .experiments.uci import METHODS, Settings
    from .experiments.uci_methods import CONCRETE_TAU, INITS

    defaults = Settings()

    uci = sub.add_parser("uci", help="the UCI regression benchmark on its standard splits")
    uci.add_argument("--dataset", required=True, help="e.g. bostonHousing (a folder under DATA_DIR/uci/)")
    uci.add_argument("--method", required=True, choices=METHODS)
    uci.add_argument("--splits", type=parse_splits, default=None, help="e.g. 0-19 (default: all)")
    uci.add_argument("--data-dir", default=None, help="folder holding uci/ (default: $PYRO_DROPOUT_DATA)")
    uci.add_argument("--out", default="results", help="one JSON file per split goes here (default: results)")
    uci.add_argument(
        "--epochs-multiplier", type=int, default=100, help="epochs = n_epochs.txt x this (default 100)"
    )
    uci.add_argument("--num-samples", type=int, default=10_000, help="T at test time (default 10000)")
    uci.add_argument(
        "--validation-samples", type=int, default=1_000, help="T for the grid search (default 1000)"
    )
    uci.add_argument("--seed", type=int, default=0)
    uci.add_argument(
        "--masks",
        choices=("example", "draw"),
        default="example",
        help="the dropout methods' training masks: one per example, as the published code "
        "(default), or one per function draw, shared by the minibatch (results labelled "
        "METHOD-per-draw)",
    )
    uci.add_argument(
        "--init",
        choices=tuple(INITS),
        default=defaults.init,
        help="initial weight means: torch.nn's U(+-1/sqrt(fan-in)) (default) or Keras' Glorot uniform",
    )
    uci.add_argument(
        "--hidden-layers",
        type=int,
        default=defaults.hidden_layers,
        help="hidden layers of n_hidden.txt units: 1, the published protocol (default); 2 is paper "
        "001's UCI network (results labelled METHOD-2-layers)",
    )
    uci.add_argument(
        "--final",
        choices=("retrain", "grid-network"),
        default="retrain",
        help="what the test rows score: the chosen (p, tau) retrained on the whole training split "
        "(default), or the grid network that validation chose, trained on 80%% of the rows, as the "
        "published code does (results labelled METHOD-grid-network)",
    )
    uci.add_argument(
        "--concrete-tau",
        choices=CONCRETE_TAU,
        default=defaults.concrete_tau,
        help="Concrete dropout's precision: held at --concrete-tau-init while the network trains, "
        "then set by the final M-step (em), or learned by MAP with the network from there, then the "
        f"final M-step (map); default {defaults.concrete_tau}",
    )
    uci.add_argument(
        "--concrete-tau-init",
        type=float,
        default=defaults.concrete_tau_init,
        help="Concrete dropout's held (em) or starting (map) precision of the standardised targets "
        f"(default {defaults.concrete_tau_init}; 1e-3 was the best start for map)",
    )
    uci.add_argument("--device", default="cpu", help="cpu or cuda")
    uci.add_argument(
        "--threads",
        type=int,
        default=None,
        help="PyTorch's CPU threads (default: its own choice, one per core); with other jobs on "
        "the machine give each job its share, e.g. 1 each for two jobs on two cores: threads "
        "that wait for a busy core made a step 2-8 times slower (docs/uci.md)",
    )
    uci.add_argument("--quiet", action="store_true", help="no progress bars")
    uci.set_defaults(func=_uci)

    table = sub.add_parser(
        "uci-table", help="markdown table of the UCI results next to the published numbers"
    )
    table.add_argument("results", help="the folder given to `pyro-dropout uci --out`")
    table.add_argument("--plot", default=None, help="also write a figure of the results here (e.g. uci.png)")
    table.add_argument("--metric", choices=["test_ll", "rmse"], default="test_ll", help="the figure's metric")
    table.set_defaults(func=_uci_table)

    progress = sub.add_parser(
        "uci-status", help="the trainings in progress and grid searches waiting in a UCI results folder"
    )
    progress.add_argument("results", help="the folder given to `pyro-dropout uci --out`")
    progress.set_defaults(func=_uci_status)

    download = sub.add_parser("download-uci", help="fetch the UCI data sets with their standard splits")
    download.add_argument("--dataset", default="all")
    download.add_argument("--data-dir", required=True)
    download.set_defaults(func=_download)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from .runtime import tune_cpu_allocator

    tune_cpu_allocator()  # the commands train small networks for hours; see its docstring
    try:
        return int(args.func(args))
    except (FileNotFoundError, ValueError) as e:  # bad input: one clear line, not a traceback
        print(f"pyro-dropout {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
