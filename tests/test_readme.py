"""Every README code block runs on its own, as a reader copies it: each in a fresh Python process,
from an empty folder, with its own imports and data; and gives what the README says it gives."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.scripts import load_script

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"


def python_blocks() -> list[str]:
    return load_script("tools", "run_tutorials").python_blocks(README)


BLOCKS = python_blocks()


@pytest.mark.slow  # each block again in a fresh interpreter: about two minutes in all
@pytest.mark.parametrize("index", range(len(BLOCKS)), ids=lambda i: f"block{i + 1}")
def test_each_block_runs_alone_in_a_fresh_process(index, tmp_path):
    out = subprocess.run(
        [sys.executable, "-c", BLOCKS[index]], cwd=tmp_path, capture_output=True, text=True, timeout=900
    )
    assert out.returncode == 0, f"README block {index + 1} failed alone:\n{out.stderr[-3000:]}"


def _run(marker: str, tmp_path, monkeypatch) -> dict:
    """The namespace after running, alone, the block that contains ``marker``."""
    monkeypatch.chdir(tmp_path)
    (block,) = [b for b in BLOCKS if marker in b]
    torch.manual_seed(0)
    namespace: dict = {}
    exec(compile(block, str(README), "exec"), namespace)
    return namespace


def test_the_quick_start_gives_what_it_says(tmp_path, monkeypatch, capsys):
    namespace = _run("Predictive(model, guide=guide, num_samples=500", tmp_path, monkeypatch)
    assert namespace["samples"]["obs"].shape == (500, 200)
    assert "torch.Size([500, 200])" in capsys.readouterr().out


def test_the_raw_site_model_leaves_its_only_input_unmasked(tmp_path, monkeypatch, capsys):
    _run("def model(x, y=None):", tmp_path, monkeypatch)
    assert "'w1': tensor(0.), 'w2': tensor(0.1000)" in capsys.readouterr().out  # x, the only input


def test_the_analysis_block_scores_and_exports(tmp_path, monkeypatch):
    namespace = _run("report = evaluate(", tmp_path, monkeypatch)
    report, full = namespace["report"], namespace["full"]
    assert report.num_samples == 1000 and report.mean.shape == (100,) and full.mean.shape == (200,)
    assert report.rmse < 0.15  # a sane fit of sin(2x) on its range (noise sd 0.1)
    assert (tmp_path / "readme_predictive.png").stat().st_size > 10_000
    assert set(namespace["idata"].groups()) >= {"posterior_predictive", "log_likelihood", "observed_data"}


def test_the_front_door_block_scores_a_trained_network(tmp_path, monkeypatch):
    namespace = _run("MCDropout(net.eval()", tmp_path, monkeypatch)
    assert namespace["bnn"].evaluate(namespace["x"], namespace["y"]).accuracy > 0.95


@pytest.mark.slow  # 20 K-fold refits: about 15 s
def test_the_kfold_block_prints_what_it_says_and_warns_of_nothing(tmp_path, monkeypatch, recwarn):
    namespace = _run("az.compare(elpd)", tmp_path, monkeypatch)
    table = namespace["table"]
    assert list(table.index) == ["relu", "linear"]
    assert (round(table.loc["linear", "elpd_diff"], 1), round(table.loc["linear", "dse"], 1)) == (34.2, 4.1)
    assert not [w for w in recwarn if "pyro_dropout" in str(w.filename) or "DropoutGuide" in str(w.message)]


def test_the_cli_lines_run_as_written_after_the_set_up_command():
    """Every ``pyro-dropout`` line of the README's shell blocks calls the command where ``make``
    installs it (``.venv/bin``, a fresh shell needs no activation) with flags the command takes."""
    import shlex

    from pyro_dropout_experiments.cli import build_parser

    lines, inside = [], False
    for line in README.read_text().splitlines():
        if line.startswith("```"):
            inside = line.startswith("```bash")
        elif inside and "pyro-dropout" in line.split("#")[0]:
            lines.append(line.split("#")[0].strip())
    assert len(lines) >= 10
    for line in lines:
        words = shlex.split(line)
        assert words[0] == ".venv/bin/pyro-dropout", line
        build_parser(words[1]).parse_args(words[1:])  # an unknown flag or value exits here
