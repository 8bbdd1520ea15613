"""Load a script of the repository (an example, a tool) as a module, by its path."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]


def load_script(folder: str, name: str) -> ModuleType:
    """``load_script("tools", "update_uci_docs")`` runs ``tools/update_uci_docs.py`` as a module."""
    spec = importlib.util.spec_from_file_location(name, REPO / folder / f"{name}.py")
    assert spec is not None and spec.loader is not None, f"no script {folder}/{name}.py"
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses in the script look their module up there
    spec.loader.exec_module(module)
    return module
