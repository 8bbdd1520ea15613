"""The tutorial pages run as written, and show the figures their code makes."""

from pathlib import Path

import pytest

from tests.scripts import load_script

tool = load_script("tools", "run_tutorials")
PAGES = sorted(tool.TUTORIALS.glob("*.md"))


def test_every_tutorial_is_in_the_site_navigation():
    nav = (tool.TUTORIALS.parents[1] / "mkdocs.yml").read_text()
    assert PAGES and all(f"tutorials/{page.name}" in nav for page in PAGES)


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES, ids=[page.stem for page in PAGES])
def test_tutorial_runs_and_makes_its_figures(page: Path, tmp_path):
    assert tool.python_blocks(page), f"{page.name} has no python block"
    import pyro

    local = pyro.settings.get("module_local_params")
    tool.run_page(page, tmp_path)
    assert pyro.settings.get("module_local_params") == local  # a page's setting does not leak out
    for figure in tool.figures_shown(page):
        assert (tmp_path / figure).is_file(), f"{page.name} shows {figure}, which its code does not make"
        assert (page.parent / figure).is_file(), f"{figure} is not committed: python tools/run_tutorials.py"
