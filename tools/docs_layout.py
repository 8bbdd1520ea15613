"""The documentation site as a reader sees it: each main page opened in Chromium at a width, a
screenshot kept, and every block that runs past the page's right edge without a scroll bar of its
own named (a code block, a table, a display equation, an image).

    make docs-check                     # builds the site, then runs this
    python tools/docs_layout.py site --out results/docs-layout [--width 1280] [--pages index ...]

Needs Chromium (Debian's package ``chromium``, or ``--browser PATH``) and the ``playwright``
package (``pip install playwright``; its own browser download is not needed). Exits 1 when a
block overflows, listing each: page, element, its width and the page's.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

PAGES = [
    "index",
    "tutorials/getting-started",
    "own-model",
    "performance",
    "uci",
    "limits",
    "active-learning",
    "maths",
    "api",
]

# an element is cut when its right edge passes the text column's (or the viewport's, or a clipping
# ancestor's), and no ancestor between them scrolls sideways
_CUT = """
() => {
  const found = [];
  const scrolls = (e) => ['auto', 'scroll'].includes(getComputedStyle(e).overflowX);
  const kinds = 'pre, table, .katex-display, img, .md-typeset__table';
  for (const e of document.querySelectorAll(kinds)) {
    const box = e.getBoundingClientRect();
    if (box.width === 0) continue;
    const column = document.querySelector('.md-content');
    let a = e.parentElement, scrolled = scrolls(e);
    const edge = column ? column.getBoundingClientRect().right : 1e9;
    let limit = Math.min(document.documentElement.clientWidth, edge);
    while (a && !scrolled) {
      if (scrolls(a)) { scrolled = true; break; }
      if (getComputedStyle(a).overflowX === 'hidden') { limit = a.getBoundingClientRect().right; break; }
      a = a.parentElement;
    }
    if (!scrolled && box.right > limit + 1) {
      const text = (e.innerText || e.getAttribute('alt') || '').trim().slice(0, 60).replace(/\\s+/g, ' ');
      found.push({tag: e.tagName.toLowerCase() + (e.className ? '.' + e.className.split(' ')[0] : ''),
                  right: Math.round(box.right), limit: Math.round(limit), text});
    }
  }
  return found;
}
"""


def check(site: Path, out: Path, width: int, pages: list[str], browser: str) -> list[str]:
    from playwright.sync_api import sync_playwright

    problems = []
    out.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=browser, args=["--no-sandbox"])
        page = chromium.new_page(viewport={"width": width, "height": 900})
        for name in pages:
            path = site / f"{name}.html"
            if not path.is_file():
                path = site / name / "index.html"
            page.goto(path.resolve().as_uri())
            page.wait_for_timeout(300)  # KaTeX renders after load
            page.screenshot(path=str(out / f"{name.replace('/', '_')}_{width}.png"), full_page=True)
            for cut in page.evaluate(_CUT):
                problems.append(
                    f"{name} @ {width}px: {cut['tag']} ends at {cut['right']} px, "
                    f"past {cut['limit']} ({cut['text']!r})"
                )
        chromium.close()
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("site", help="the built site (make docs: site/)")
    parser.add_argument("--out", default="results/docs-layout", help="screenshots go here")
    parser.add_argument("--width", type=int, action="append", help="viewport widths (default 1280 and 390)")
    parser.add_argument("--pages", nargs="+", default=PAGES)
    parser.add_argument("--browser", default=shutil.which("chromium") or "/usr/bin/chromium")
    args = parser.parse_args(argv)
    if not Path(args.browser).is_file():
        print(
            f"docs_layout: no Chromium at {args.browser}: install Debian's package "
            "(apt-get install chromium) or pass --browser PATH",
            file=sys.stderr,
        )
        return 2
    problems = []
    for width in args.width or [1280, 390]:
        problems += check(Path(args.site), Path(args.out), width, args.pages, args.browser)
    print("\n".join(problems) if problems else f"no block runs past the page ({len(args.pages)} pages)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
