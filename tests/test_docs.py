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
