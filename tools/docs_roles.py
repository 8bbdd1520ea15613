"""MkDocs hook: the Sphinx roles of the docstrings (``:class:`~pyro_dropout.infer.DropoutELBO```)
become links to the object's entry in the API reference, or code where the object has none.

The API pages render docstrings as Markdown, where a role shows as ``:class:<code>...</code>``.
After the site is built, every page's roles are rewritten: the target (its last part where it
starts with ``~``) is looked up among the ids the reference pages give their objects (also as
re-exported by a package's face, and a method under its class), and linked by a path relative to
the page, so that the site works opened from disk. ``tests/test_site.py`` checks the built site.
"""

from __future__ import annotations

import html
import os
import re
from pathlib import Path

ROLE = re.compile(r":(?:func|class|mod|meth|attr|data|obj|exc):<code>(.*?)</code>", flags=re.S)
ID = re.compile(r'id="((?:pyro_dropout|pyro)[\w.]*)"')


def _ids(site: Path) -> dict[str, Path]:
    """Every object id of the reference pages, and the page that holds it."""
    found: dict[str, Path] = {}
    for page in sorted(site.rglob("*.html")):
        for match in ID.finditer(page.read_text(errors="replace")):
            found.setdefault(match[1], page)
    return found


def _target(name: str, ids: dict[str, Path]) -> str | None:
    """The id of ``name``, as written or as its package face re-exports it."""
    if name in ids:
        return name
    parts = name.split(".")
    for cut in range(len(parts) - 1, 0, -1):  # pyro_dropout.nn.functional.linear -> pyro_dropout.nn.linear
        for keep in range(1, cut):
            candidate = ".".join(parts[: keep + 1] + parts[cut:])
            if candidate in ids:
                return candidate
    tails = [i for i in ids if i.endswith("." + parts[-1])]
    return tails[0] if len(tails) == 1 else None


def _rewrite(page: Path, ids: dict[str, Path]) -> str:
    text = page.read_text(errors="replace")

    def link(match: re.Match) -> str:
        raw = html.unescape(match[1]).strip()
        titled = re.fullmatch(r"(.*?)\s*<(.+)>", raw)
        title, name = (titled[1], titled[2]) if titled else (None, raw)
        short = name.lstrip("~")
        shown = title or (short.split(".")[-1] if name.startswith("~") else short)
        target = _target(short, ids)
        code = f"<code>{html.escape(shown)}</code>"
        if target is None:
            return code
        href = os.path.relpath(ids[target], page.parent).replace(os.sep, "/")
        href = "" if ids[target] == page else href
        return f'<a href="{href}#{target}">{code}</a>'

    return ROLE.sub(link, text)


def on_post_build(config) -> None:  # MkDocs passes its config
    site = Path(config["site_dir"])
    ids = _ids(site / "reference") if (site / "reference").is_dir() else {}
    for page in site.rglob("*.html"):
        text = page.read_text(errors="replace")
        if ":<code>" in text:
            page.write_text(_rewrite(page, ids))
    index = site / "search" / "search_index.json"  # the search's text: the roles as plain code
    if index.is_file():
        index.write_text(
            re.sub(r":(?:func|class|mod|meth|attr|data|obj|exc):<code>", "<code>", index.read_text())
        )
