"""The package keeps its shape: files under 300 lines, functions under 50, no private name
imported across modules (in the package or its tests), and imports pointing down the layers."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "pyro_dropout"
# the layers of DESIGN.md, lowest first; a module may import from its own layer or below
LAYERS = [
    {"ops", "runtime"},
    {"distributions"},
    {"nn"},
    {"guides"},
    {"infer"},
    {"metrics", "export", "attacks", "policies", "lightning"},
    {"baselines", "datasets"},
    {"experiments", "cli", "__init__"},
]


def _layer(module: str) -> int:
    return next(i for i, names in enumerate(LAYERS) if module in names)


def _sources(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.py"))


@pytest.mark.parametrize("path", _sources(PACKAGE), ids=lambda p: str(p.relative_to(ROOT)))
def test_files_and_functions_stay_small(path):
    text = path.read_text()
    assert len(text.splitlines()) <= 300, f"{path.name} has {len(text.splitlines())} lines"
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = node.end_lineno - node.lineno + 1
            assert length <= 50, f"{path.name}:{node.lineno} {node.name} has {length} lines"


def _imported_names(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                yield node, alias.name


@pytest.mark.parametrize("folder", ["pyro_dropout", "tests", "tools", "examples", "benchmarks"])
def test_no_private_name_is_imported_across_modules(folder):
    found = []
    for path in _sources(ROOT / folder):
        for node, name in _imported_names(ast.parse(path.read_text())):
            if name.startswith("_") and not name.startswith("__"):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {name} from {node.module}")
    assert not found, "\n".join(found)


def test_package_imports_point_down_the_layers():
    found = []
    for path in _sources(PACKAGE):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        here = _layer(parts[0])
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level > 0 and node.module:
                depth = len(parts) - node.level  # how many package levels the relative import keeps
                target = (parts[:depth] + tuple(node.module.split(".")))[0] if depth >= 0 else None
                if target and _layer(target) > here:
                    where = f"{path.relative_to(ROOT)}:{node.lineno}"
                    found.append(f"{where} imports {node.module} (a higher layer)")
    assert not found, "\n".join(found)
