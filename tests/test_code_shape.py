"""The packages keep their shape: no private name imported across modules (in the packages or their
tests), imports pointing down the library's layers (docs/design.md), the reproductions importing the
library through its faces only, no circle in either package's import graph, and no TorchScript.
The size of files and functions is for review (docs/design.md), not a cap a test enforces."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "pyro_dropout"
EXPERIMENTS = ROOT / "experiments" / "pyro_dropout_experiments"
# the layers of docs/design.md, lowest first; a module may import from its own layer or below
LAYERS = [
    {"ops", "runtime", "guards"},
    {"distributions"},
    {"nn"},
    {"guides"},
    {"infer"},
    {"prediction"},
    {"metrics", "export", "attacks", "policies", "lightning"},
    {"baselines", "datasets"},
    {"front", "batches", "active"},
    {"__init__"},
]


def _layer(module: str) -> int:
    return next(i for i, names in enumerate(LAYERS) if module in names)


def _sources(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.py"))


def _imported_names(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                yield node, alias.name


@pytest.mark.parametrize(
    "folder",
    ["pyro_dropout", "experiments/pyro_dropout_experiments", "tests", "tools", "examples", "benchmarks"],
)
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


def _faces() -> set[str]:
    """The library's public faces: its subpackages and top-level modules."""
    return {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()} | {
        p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"
    }


def test_reproductions_import_the_library_through_its_faces():
    faces, found = _faces(), []
    for path in _sources(EXPERIMENTS):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                parts = node.module.split(".")
                deep = parts[0] == "pyro_dropout" and (
                    len(parts) > 2 or (len(parts) == 2 and parts[1] not in faces)
                )
                if deep:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {node.module}")
    assert not found, "\n".join(found)


def test_the_library_holds_no_experiment():
    assert not (PACKAGE / "experiments").exists() and not (PACKAGE / "cli.py").exists()
    for path in _sources(PACKAGE):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom | ast.Import):
                names = (
                    [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                )
                assert not any(n.startswith("pyro_dropout_experiments") for n in names), path


def _module_name(path: Path, top: Path) -> str:
    parts = path.relative_to(top.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports_of(path: Path, top: Path, modules: set[str]) -> set[str]:
    """The modules of the same package that ``path`` imports, anywhere in it (a function's lazy
    import included): ``from .x import y`` is the module ``x.y`` where that is one, else ``x``."""
    name = _module_name(path, top)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                child = f"{target}.{alias.name}"
                found.add(child if child in modules else target)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return {m for m in found if m in modules and m != name}


@pytest.mark.parametrize("top", [PACKAGE, EXPERIMENTS], ids=lambda p: p.name)
def test_no_circle_in_the_import_graph(top):
    """A package's ``__init__`` (its face) may import its own modules; a circle through other
    modules (a module importing the face of a package that imports it back) is an error."""
    paths = {_module_name(p, top): p for p in _sources(top)}
    graph = {m: _imports_of(p, top, set(paths)) for m, p in paths.items()}
    state: dict[str, int] = {}

    def visit(m: str, stack: list[str]) -> None:
        state[m] = 1
        for t in sorted(graph[m]):
            if state.get(t) == 1:
                raise AssertionError("import circle: " + " -> ".join([*stack[stack.index(t) :], t]))
            if t not in state:
                visit(t, [*stack, t])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])


def test_importing_the_library_loads_no_experiment():
    import subprocess
    import sys

    code = (
        "import sys, pyro_dropout; "
        "print([m for m in sys.modules if m.split('.')[0] == 'pyro_dropout_experiments'])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


def test_the_library_uses_no_torchscript_nor_private_c_api():
    """Recording is torch.fx's and compiling torch.compile's; TorchScript (deprecated) and graph
    surgery through private passes crashed the process (docs/design.md, traps)."""
    for path in _sources(PACKAGE):
        text = path.read_text()
        for banned in ("torch.jit.trace", "torch.jit.script", "torch._C", "_jit_pass"):
            assert banned not in text, f"{path.relative_to(ROOT)} uses {banned}"
