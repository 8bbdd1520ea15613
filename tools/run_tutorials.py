"""Run the tutorial pages of the docs (``docs/tutorials/*.md``) and refresh their figures.

Each page's ``python`` blocks run in order in one namespace, in the folder given (the page's
figures are saved under ``img/`` there). The test suite runs them in a temporary folder; this
script runs them in ``docs/tutorials`` so that the figures the pages show are the ones their code
makes::

    python tools/run_tutorials.py                   # every page
    python tools/run_tutorials.py own-model.md      # one page
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path

TUTORIALS = Path(__file__).resolve().parents[1] / "docs" / "tutorials"


def python_blocks(page: Path) -> list[str]:
    """The page's fenced ``python`` blocks, in order (a tutorial page's, or the README's)."""
    return re.findall(r"^```python\n(.*?)^```", page.read_text(), flags=re.S | re.M)


def figures_shown(page: Path) -> list[str]:
    """The images the page shows, as paths relative to the page."""
    return re.findall(r"!\[[^\]]*\]\(([^)\s]+\.png)\)", page.read_text())


@contextlib.contextmanager
def working_directory(folder: Path) -> Iterator[None]:
    before = Path.cwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


def run_page(page: Path, folder: Path) -> dict:
    """Run the page's blocks in ``folder`` (a page makes its own ``img/``); return their namespace."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    namespace: dict = {"__name__": f"tutorial_{page.stem.replace('-', '_')}"}
    import pyro

    # a page may change Pyro's module_local_params setting: restored after the page
    local = pyro.settings.get("module_local_params")
    try:
        with working_directory(folder), pyro.settings.context(module_local_params=local):
            for number, block in enumerate(python_blocks(page), 1):
                exec(compile(block, f"{page.name}, python block {number}", "exec"), namespace)
    finally:
        plt.close("all")
    return namespace


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pages", nargs="*", help="page file names (default: every page)")
    args = parser.parse_args(argv)
    pages = [TUTORIALS / name for name in args.pages] or sorted(TUTORIALS.glob("*.md"))
    for page in pages:
        start = time.perf_counter()
        run_page(page, TUTORIALS)
        print(f"{page.name}: {time.perf_counter() - start:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
