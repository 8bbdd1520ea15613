"""Every ``pyro-dropout`` command behaves the same way: the flags of a command that trains, one
line for every error, help texts that are right, and ``--help`` without importing a method."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import pytest
import torch

from pyro_dropout_experiments.cli import build_parser, main, out_folder
from pyro_dropout_experiments.core import QUICK_BUDGET

# every command that trains, with the arguments it requires
TRAINING = {
    "demo": ["demo"],
    "uci": ["uci", "--dataset", "bostonHousing", "--method", "mc-dropout"],
    "mnist ood": ["mnist", "ood"],
    "mnist rotated": ["mnist", "rotated"],
    "mnist concrete": ["mnist", "concrete"],
    "mnist bbalpha": ["mnist", "bbalpha"],
    "mnist adversarial": ["mnist", "adversarial"],
    "co2": ["co2"],
    "solar": ["solar"],
    "synthetic": ["synthetic"],
    "forecast": ["forecast"],
    "bandit": ["bandit"],
    "rl": ["rl"],
    "dynamics": ["dynamics"],
    "active-learning": ["active-learning"],
    "lm-uncertainty": ["lm-uncertainty"],
}
OTHERS = {"uci-table": ["uci-table"], "uci-status": ["uci-status"], "download-uci": ["download-uci"]}


def _parser_of(words: list[str]) -> argparse.ArgumentParser:
    """The subparser of a command (``["mnist", "ood"]``: two levels down)."""
    parser = build_parser(words[0])
    for word in words:
        if word.startswith("-"):
            break
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[word]
    return parser


def _words(argv: list[str]) -> list[str]:
    return [w for w in argv[: 2 if argv[0] == "mnist" else 1]]


@pytest.mark.parametrize("name", [*TRAINING, *OTHERS])
def test_every_option_has_help_and_states_its_default_once(name):
    argv = {**TRAINING, **OTHERS}[name]
    parser = _parser_of(_words(argv))
    problems = []
    for action in parser._actions:
        if not action.option_strings or action.help == argparse.SUPPRESS:
            continue
        text = action.help or ""
        flag = action.option_strings[-1]
        if len(text.strip()) < 5:
            problems.append(f"{flag}: no help text")
        if text.count("default") > 1:
            problems.append(f"{flag}: states its default twice: {text!r}")
        if "(default None)" in text:
            problems.append(f"{flag}: 'default None' says nothing: {text!r}")
    assert not problems, "\n".join(problems)
    parser.format_help()  # renders


@pytest.mark.parametrize("name", TRAINING)
def test_every_command_that_trains_takes_device_threads_and_quick(name):
    flags = {o for a in _parser_of(_words(TRAINING[name]))._actions for o in a.option_strings}
    assert {"--device", "--threads", "--quick", "--out"} <= flags
    quick = next(a for a in _parser_of(_words(TRAINING[name]))._actions if "--quick" in a.option_strings)
    assert QUICK_BUDGET in quick.help  # one promise, stated once in core.command


def test_commands_read_data_only_where_they_have_data():
    no_data = ["synthetic", "bandit", "rl", "dynamics", "demo"]
    for name in no_data:
        flags = {o for a in _parser_of([name])._actions for o in a.option_strings}
        assert "--data-dir" not in flags, name


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error where there is no CUDA")
@pytest.mark.parametrize("name", TRAINING)
def test_device_cuda_without_cuda_is_one_line(name, capsys):
    with pytest.raises(SystemExit) as stop:
        main([*TRAINING[name], "--device", "cuda"])
    err = capsys.readouterr().err.strip()
    assert stop.value.code == 2 and len(err.splitlines()) == 1
    assert "CUDA is not available" in err and err.startswith("pyro-dropout")


@pytest.mark.parametrize("name", TRAINING)
def test_an_out_folder_that_cannot_be_one_is_one_line(name, tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    assert main([*TRAINING[name], "--out", str(blocker / "sub")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "is a file, not a folder" in err
    assert main([*TRAINING[name], "--out", str(blocker)]) == 2
    assert "is a file, not a folder" in capsys.readouterr().err


def test_misspelt_commands_get_the_closest_match(capsys):
    for argv, hint in [(["ucii"], "did you mean 'uci'"), (["mnist", "rotaed"], "did you mean 'rotated'")]:
        with pytest.raises(SystemExit):
            main(argv)
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and hint in err


def test_help_imports_no_method():
    code = (
        "import sys, contextlib, io\n"
        "from pyro_dropout_experiments.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "    main(['--help'])\n"
        "print(sorted(m for m in sys.modules if '.uci.methods' in m))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_uci_help_lists_every_methods_flags():
    flags = {o for a in _parser_of(["uci"])._actions for o in a.option_strings}
    assert {"--concrete-tau-grid", "--bbalpha-particles", "--hmc-warmup"} <= flags


# the commands whose results live in one results.json
RESULTS_FILE = [n for n in TRAINING if n not in ("demo", "uci")]


@pytest.mark.parametrize("name", RESULTS_FILE)
def test_another_commands_results_are_refused_and_kept(name, tmp_path, capsys):
    other = "bandit" if name != "bandit" else "rl"
    kept = json.dumps({"schema_version": 2, "command": other, "settings": {}, "runs": {"a": 1}})
    (tmp_path / "results.json").write_text(kept)
    assert main([*TRAINING[name], "--quick", "--quiet", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"holds the results of `pyro-dropout {other}`" in err
    assert (tmp_path / "results.json").read_text() == kept


@pytest.mark.parametrize("name", RESULTS_FILE)
def test_a_results_file_that_is_a_link_is_refused_and_its_target_kept(name, tmp_path, capsys):
    outside = tmp_path / "outside.json"
    outside.write_text("precious")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "results.json").symlink_to(outside)
    assert main([*TRAINING[name], "--quick", "--quiet", "--out", str(tmp_path / "out")]) == 2
    assert "is a symbolic link" in capsys.readouterr().err
    assert outside.read_text() == "precious"


def test_the_uci_help_says_where_quick_runs_go_and_where_the_data_are_looked_for():
    text = " ".join(_parser_of(["uci"]).format_help().split())
    assert "(default results/uci; results/uci-quick with --quick)" in text
    assert "$PYRO_DROPOUT_DATA, else ../shared/data beside a source checkout, else ./data" in text


def test_quick_runs_write_beside_the_full_runs_unless_out_is_given():
    parser = build_parser("synthetic")
    assert out_folder(parser.parse_args(["synthetic", "--quick"])) == "results/synthetic-quick"
    assert out_folder(parser.parse_args(["synthetic"])) == "results/synthetic"
    assert out_folder(parser.parse_args(["synthetic", "--quick", "--out", "results/synthetic"])) == (
        "results/synthetic"
    )


@pytest.mark.parametrize("name", RESULTS_FILE)
def test_results_made_with_other_settings_are_refused_and_kept(name, tmp_path, capsys):
    kept = json.dumps({"schema_version": 2, "command": name, "settings": {"a_setting_of_old": 1}})
    (tmp_path / "results.json").write_text(kept)
    assert main([*TRAINING[name], "--quick", "--quiet", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"--out {tmp_path} holds results made with other settings" in err
    assert "a_setting_of_old=1 there, None here" in err
    assert (tmp_path / "results.json").read_text() == kept


def test_ctrl_c_is_one_line_that_says_how_to_resume(tmp_path, monkeypatch, capsys):
    import pyro_dropout_experiments.uci.benchmark as benchmark

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(benchmark, "run_uci", stopped)  # as if Ctrl-C came during the training
    code = main([*TRAINING["uci"], "--quick", "--quiet", "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert code == 130 and len(err.splitlines()) == 1
    assert "stopped; the splits that finished are kept in --out; run the same command to resume" in err
