"""The documentation site as a reader sees it: built with ``mkdocs build --strict`` (as ``make
docs``), its API pages show no raw markup of the docstrings (Sphinx roles, ``::`` literals,
``.. math::`` directives, maths turned into emphasis), every role became a link that resolves or
plain code, and every page is a file that opens from disk."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # builds the whole site: about half a minute

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    pytest.importorskip("mkdocs")
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=REPO,
        check=True,
        capture_output=True,
        env=env,
    )
    return out


def _text(page: Path) -> str:
    """A page's HTML without its code blocks (where a literal ``::`` is code)."""
    return re.sub(r"<pre.*?</pre>", "", page.read_text(), flags=re.S)


def test_the_api_pages_show_no_raw_markup(site):
    pages = sorted((site / "reference").glob("*.html"))
    assert len(pages) >= 9
    for page in pages:
        text = _text(page)
        raw = {
            "roles": re.findall(r":(?:func|class|mod|meth|attr|data|obj|exc):<code>", text),
            "literal ::": re.findall(r"\w::</p>", text),
            ".. math::": re.findall(r"\.\. math::", text),
            "maths as emphasis": re.findall(r"<em k=", text),
            "unrendered $$": re.findall(
                r"(?<!\\)\$\$", re.sub(r'<div class="arithmatex">.*?</div>', "", text, flags=re.S)
            ),
        }
        assert not any(raw.values()), f"{page.name}: { ({k: len(v) for k, v in raw.items() if v}) }"


def test_the_links_the_roles_became_resolve(site):
    for page in sorted((site / "reference").glob("*.html")):
        for href, anchor in re.findall(r'<a href="([^"#]*)#(pyro_dropout[\w.]*)"><code>', page.read_text()):
            target = (page.parent / href) if href else page
            assert f'id="{anchor}"' in target.read_text(), f"{page.name}: {href}#{anchor} does not resolve"


def test_the_site_opens_from_disk(site):
    index = (site / "index.html").read_text()
    links = re.findall(r'href="([^"#:]+)"', index)
    pages = [link for link in links if not link.endswith((".css", ".js", ".png", ".svg", ".ico", ".json"))]
    assert pages and all(
        link.endswith(".html") for link in pages if "." in Path(link).name or link.endswith("/")
    ), pages
    assert all((site / link).resolve().is_file() for link in pages if link.endswith(".html"))
