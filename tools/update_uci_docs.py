"""Refresh the Results section of docs/uci.md from finished UCI runs.

    python tools/update_uci_docs.py [results/uci] [--prune]

Copies every per-split JSON file from the results folder into docs/results/uci (a file of the
same name there is replaced), redraws docs/img/uci_test_ll.png, and rewrites the generated
block of docs/uci.md: everything from the line that ends the Results introduction up to
"## Notes". The notes are written by hand.

The kept files that the results folder lacks stay, so a results folder that holds only the
runs made since the last refresh (a fresh checkout, say) adds to the page instead of emptying
it. With ``--prune`` they are removed: the page then shows exactly the results folder
(superseded runs gone).
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from pyro_dropout_experiments.uci import collect, markdown_table, plot_uci

ANCHOR = "prints every table, the wall times and the groups of runs included.\n"
FIGURE = "![Test log-likelihood of every method on every data set](img/uci_test_ll.png)\n"


def generated_block(rows: list[dict]) -> str:
    """The text between ``ANCHOR`` and the notes: the figure, then the tables (the headline and the
    variants; the wall-time and run-group tables are ``pyro-dropout uci-table``'s)."""
    return "\n" + FIGURE + "\n" + markdown_table(rows, full=False).replace("### ", "#### ") + "\n"


def update(results: Path, docs: Path, prune: bool = False) -> str:
    """Copy ``results`` into ``docs/results/uci`` (with ``prune``, also remove the kept files
    that ``results`` lacks), redraw the figure, rewrite ``docs/uci.md``."""
    kept = docs / "results" / "uci"
    kept.mkdir(parents=True, exist_ok=True)
    fresh = {f.name for f in results.glob("*.json")}
    if not fresh:
        raise FileNotFoundError(f"no result files in {results}; run `pyro-dropout uci ... --out {results}`")
    for name in fresh:
        shutil.copy(results / name, kept / name)
    if prune:
        for f in kept.glob("*.json"):
            if f.name not in fresh:
                f.unlink()
    rows = collect(kept)
    (docs / "img").mkdir(exist_ok=True)
    plot_uci(rows, "test_ll").savefig(docs / "img" / "uci_test_ll.png", dpi=120)
    page = docs / "uci.md"
    text = page.read_text()
    start = text.index(ANCHOR) + len(ANCHOR)
    end = text.index("## Notes")
    block = generated_block(rows)
    page.write_text(text[:start] + block + text[end:])
    return block


if __name__ == "__main__":
    root = Path(__file__).resolve().parents[1]
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("results", nargs="?", type=Path, default=root / "results" / "uci")
    parser.add_argument("--prune", action="store_true", help="also remove the kept files that RESULTS lacks")
    args = parser.parse_args()
    print(update(args.results, root / "docs", prune=args.prune))
