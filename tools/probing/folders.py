"""Results folders and paths: another command's results, other settings, links out of
``--out``, broken results files, and paths that cannot be folders. A probe here is unsafe if any
file that was there before it ran changed."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .base import Probe
from .cli import CURVE_TINY, MNIST_TINY, cli, refused


def _kept(out: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file() and not p.is_symlink()}


class Folder:
    """A results folder (and a file outside it) prepared for one probe; ``safe()`` says that
    what was there is still there, byte for byte, and the outside file was not written."""

    def __init__(self, prepare: Callable[[Path, Path], None]) -> None:
        self.prepare = prepare
        self.before: dict[str, bytes] = {}
        self.root: Path | None = None  # made when the probe runs

    def run(self, argv: list[str]) -> int:
        self.root = Path(tempfile.mkdtemp(prefix="probe-"))
        out, outside = self.root / "out", self.root / "outside.json"
        out.mkdir(exist_ok=True)
        outside.write_text('{"mine": 1}')
        self.prepare(out, outside)
        self.before = _kept(self.root)
        return cli([*argv, "--out", str(out)])

    def safe(self) -> bool:
        if self.root is None:
            return True
        after = _kept(self.root)
        shutil.rmtree(self.root)
        return all(after.get(name) == data for name, data in self.before.items())


def _first_run(argv: list[str]) -> Callable[[Path, Path], None]:
    return lambda out, outside: cli([*argv, "--out", str(out)])


def _link(name: str) -> Callable[[Path, Path], None]:
    return lambda out, outside: (out / name).symlink_to(outside)


def _write(name: str, text: str) -> Callable[[Path, Path], None]:
    return lambda out, outside: (out / name).write_text(text)


def _edit_nan(argv: list[str]) -> Callable[[Path, Path], None]:
    def prepare(out: Path, outside: Path) -> None:
        cli([*argv, "--out", str(out)])
        path = out / "results.json"
        path.write_text(path.read_text().replace('"epistemic": [', '"epistemic": [NaN, ', 1))

    return prepare


def _fifo(name: str) -> Callable[[Path, Path], None]:
    return lambda out, outside: os.mkfifo(out / name)  # reading it would block forever


BBALPHA = ["mnist", "bbalpha", *MNIST_TINY, "--train-size", "200", "--alphas", "0.5", "--repeats", "1"]
BANDIT = ["bandit", "--rounds", "30", "--repeats", "1", "--quiet"]
RL = ["rl", "--batches", "40", "--burn-in", "20", "--hidden", "8", "--batch-size", "8", "--quiet"]
SYNTHETIC = ["synthetic", *CURVE_TINY, "--sizes", "10", "--quiet"]


def results_probes() -> list[Probe]:
    cases: list[tuple[str, Callable[[Path, Path], None], list[str], tuple[str, ...]]] = [
        ("bandit into rl's folder", _first_run(RL), BANDIT, ("--out",)),
        ("rl again with other --batches", _first_run(RL), [*RL[:2], "50", *RL[3:]], ("--out", "batches")),
        (
            "synthetic again with other --steps",
            _first_run(SYNTHETIC),
            [*SYNTHETIC, "--steps", "25"],
            ("--out",),
        ),
        ("results.json a link outside --out", _link("results.json"), SYNTHETIC, ("link",)),
        ("synthetic.png a link outside --out", _link("synthetic.png"), SYNTHETIC, ("link",)),
    ]
    cases += [
        ("synthetic on a results.json holding NaN", _edit_nan(SYNTHETIC), SYNTHETIC, ("NaN",)),
        ("synthetic on a FIFO at results.json", _fifo("results.json"), SYNTHETIC, ("regular file",)),
        (
            "synthetic on a deeply nested results.json",
            _write("results.json", "[" * 100_000),
            SYNTHETIC,
            ("nested",),
        ),
        ("mnist bbalpha on a results.json of []", _write("results.json", "[]"), BBALPHA, ("results.json",)),
        (
            "mnist bbalpha on a truncated results.json",
            _write("results.json", '{"command": "mn'),
            BBALPHA,
            ("results.json",),
        ),
    ]
    probes = []
    for what, prepare, argv, names in cases:
        folder = Folder(prepare)
        probes.append(Probe("results", what, lambda f=folder, a=argv: f.run(a), names, refused, folder.safe))
    return probes


def _beside_a_file(argv: Callable[[Path], list[str]]) -> int:
    with tempfile.TemporaryDirectory() as folder:
        blocker = Path(folder) / "a-file"
        blocker.write_text("not a folder")
        return cli(argv(blocker))


def _table_meeting_other_results() -> int:
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "mnist-ood").mkdir()
        (Path(folder) / "mnist-ood" / "results.json").write_text('{"command": "mnist ood", "methods": {}}')
        return cli(["uci-table", folder])


def path_probes() -> list[Probe]:
    cases: list[tuple[str, Callable[[], Any], tuple[str, ...]]] = [
        (
            "demo --out FILE",
            lambda: _beside_a_file(lambda f: ["demo", "--steps", "5", "--out", str(f)]),
            ("a-file",),
        ),
        (
            "demo --out FILE/sub",
            lambda: _beside_a_file(lambda f: ["demo", "--out", str(f / "sub")]),
            ("a-file",),
        ),
        (
            "uci --out FILE",
            lambda: _beside_a_file(
                lambda f: [
                    "uci",
                    "--dataset",
                    "bostonHousing",
                    "--method",
                    "mc-dropout",
                    "--quick",
                    "--out",
                    str(f),
                ]
            ),
            ("a-file",),
        ),
        (
            "uci-table --plot FILE/uci.png",
            lambda: _beside_a_file(lambda f: ["uci-table", str(f.parent), "--plot", str(f / "uci.png")]),
            ("a-file",),
        ),
        (
            "download-uci --data-dir FILE",
            lambda: _beside_a_file(lambda f: ["download-uci", "--data-dir", str(f)]),
            ("a-file",),
        ),
        ("uci-table meeting mnist ood's results.json", _table_meeting_other_results, ("result",)),
        ("synthetic --out ''", lambda: cli([*SYNTHETIC, "--out", ""]), ("--out is empty",)),
    ]
    return [Probe("command paths", what, call, names, refused) for what, call, names in cases]
