"""The API page names every public name of every subpackage."""

import importlib
from pathlib import Path

import pytest

API = (Path(__file__).resolve().parents[1] / "docs" / "api.md").read_text()


@pytest.mark.parametrize(
    "module", ["distributions", "nn", "guides", "infer", "metrics", "export", "datasets", "baselines"]
)
def test_every_public_name_is_documented(module):
    mod = importlib.import_module(f"pyro_dropout.{module}")
    missing = [name for name in mod.__all__ if f"`{name}" not in API and f".{name}(" not in API]
    assert not missing, f"docs/api.md does not document pyro_dropout.{module}: {missing}"


def test_uci_page_shows_the_kept_results():
    from pyro_dropout.experiments.uci_table import collect, markdown_table

    docs = Path(__file__).resolve().parents[1] / "docs"
    page = (docs / "uci.md").read_text()
    table = markdown_table(collect(docs / "results" / "uci")).replace("### ", "#### ")
    assert table in page, "docs/uci.md is out of date: regenerate it from docs/results/uci"
    assert "(img/uci_test_ll.png)" in page and (docs / "img" / "uci_test_ll.png").is_file()
