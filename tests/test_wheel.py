"""The two distributions build as wheels: the library's holds the library only (no experiment,
test, doc or result), and both install into a fresh virtual environment where the library
predicts and the ``pyro-dropout`` command answers."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import textwrap
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # builds two wheels and a virtual environment: about half a minute

REPO = Path(__file__).resolve().parents[1]


def _wheel(source: Path, out: Path) -> Path:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(out),
            str(source),
        ],
        check=True,
        capture_output=True,
    )
    (wheel,) = [w for w in out.glob("*.whl") if w.name.split("-")[0] == _dist(source)]
    return wheel


def _dist(source: Path) -> str:
    return "pyro_dropout_experiments" if source.name == "experiments" else "pyro_dropout"


@pytest.fixture(scope="module")
def wheels(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheels")
    return _wheel(REPO, out), _wheel(REPO / "experiments", out)


def test_the_library_wheel_holds_the_library_only(wheels):
    library, experiments = (zipfile.ZipFile(w).namelist() for w in wheels)
    top = {name.split("/")[0] for name in library}
    assert top == {"pyro_dropout", "pyro_dropout-0.1.0.dist-info"}, top
    assert "pyro_dropout/datasets/uci_manifest.json" in library  # its data file travels with it
    assert "pyro_dropout/py.typed" in library  # type checkers read its annotations (PEP 561)
    assert not any("experiments" in n or n.startswith(("tests", "docs")) for n in library)
    assert {n.split("/")[0] for n in experiments} == {
        "pyro_dropout_experiments",
        "pyro_dropout_experiments-0.1.0.dist-info",
    }
    entry_points = next(n for n in experiments if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheels[1]).read(entry_points).decode()
    assert "pyro-dropout = pyro_dropout_experiments.cli:main" in text


def test_the_wheels_install_and_run_in_a_fresh_environment(wheels, tmp_path):
    env = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    python = env / "bin" / "python"
    site = Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    # torch, pyro and the rest from this environment (a fresh install would download them again);
    # a path added by a .pth file does not run that folder's own .pth files, so the checkout's
    # editable install of the two packages is not seen there
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    install = [
        sys.executable,
        "-m",
        "pip",
        "--python",
        str(python),
        "install",
        "-q",
        "--no-deps",
        "--no-index",
    ]
    subprocess.run([*install, *map(str, wheels)], check=True, capture_output=True)
    code = textwrap.dedent(
        """
        import pyro, torch, pyro_dropout
        from pyro_dropout import DropoutGuide, predict
        from pyro_dropout.nn import MLP
        assert pyro_dropout.__file__.startswith(sys.argv[1]), pyro_dropout.__file__
        model = MLP(2, hidden=(8,), tau=4.0)
        guide = DropoutGuide(model)
        guide(torch.randn(5, 2), torch.randn(5))
        pred = predict(model, guide, torch.randn(7, 2), num_samples=11)
        print(tuple(pred.means["obs"].shape))
        """
    ).replace("import pyro,", "import sys, pyro,")
    # run away from the checkout: `python -c` puts the working folder first on the path
    out = subprocess.run(
        [python, "-c", code, str(site)], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    assert out.stdout.strip() == "(11, 7)"
    command = subprocess.run(
        [env / "bin" / "pyro-dropout", "--help"], capture_output=True, text=True, check=True
    )
    assert "the UCI regression benchmark" in command.stdout
