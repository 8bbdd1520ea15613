"""The pyro-dropout command: its subcommands, and values checked when parsed."""

import json
import re

import pytest
import torch

from pyro_dropout_experiments.cli import main, parse_splits
from pyro_dropout_experiments.uci import (
    collect,
    markdown_table,
)


# an integration run of two methods end to end (over a minute): slow
@pytest.mark.slow
def test_table_and_cli(tiny, capsys):
    out = tiny / "results"
    assert (
        main(
            [
                "uci",
                "--dataset",
                "tiny",
                "--method",
                "ensemble",
                "--splits",
                "0-1",
                "--data-dir",
                str(tiny),
                "--out",
                str(out),
                "--epochs-multiplier",
                "1",
                "--quiet",
            ]
        )
        == 0
    )
    rows = collect(out)
    assert {r["split"] for r in rows} == {0, 1}
    common = ["--dataset", "tiny", "--splits", "0", "--data-dir", str(tiny), "--out", str(tiny / "pd")]
    assert (
        main(["uci", *common, "--method", "mc-dropout", "--masks", "draw", "--epochs-multiplier", "1"]) == 0
    )
    stored = json.loads((tiny / "pd" / "tiny_mc-dropout-per-draw_split00.json").read_text())
    assert stored["settings"]["per_example_masks"] is False
    assert main(["uci", *common, "--method", "mfvi", "--hidden-layers", "2", "--epochs-multiplier", "1"]) == 0
    stored = json.loads((tiny / "pd" / "tiny_mfvi-2-layers_split00.json").read_text())
    assert stored["settings"]["hidden_layers"] == 2
    assert (
        main(["uci", *common, "--method", "mfvi", "--final", "grid-network", "--epochs-multiplier", "1"]) == 0
    )
    assert (tiny / "pd" / "tiny_mfvi-grid-network_split00.json").is_file()
    own = ["--method", "mfvi", "--tau-values", "2,300", "--epochs-multiplier", "1"]
    assert main(["uci", *common, *own]) == 0  # a precision grid of one's own: a label of its own
    stored = json.loads((tiny / "pd" / "tiny_mfvi-own-tau-grid_split00.json").read_text())
    assert stored["settings"]["tau_values"] == [2.0, 300.0] and stored["tau"] in (2.0, 300.0)
    em = [
        "--method",
        "concrete",
        "--concrete-tau",
        "em",
        "--concrete-tau-init",
        "0.5",
        "--epochs-multiplier",
        "1",
    ]
    assert main(["uci", *common, *em]) == 0
    stored = json.loads((tiny / "pd" / "tiny_concrete_split00.json").read_text())["settings"]
    assert (stored["concrete_tau"], stored["concrete_tau_init"]) == ("em", 0.5)
    threads = torch.get_num_threads()
    try:
        assert main(["uci", *common, "--method", "sgp", "--threads", "1"]) == 0
        assert json.loads((tiny / "pd" / "tiny_sgp_split00.json").read_text())["threads"] == 1
    finally:
        torch.set_num_threads(threads)
    table = markdown_table(rows)
    assert "| tiny |" in table and "ensemble" in table and "2018 grid-search re-run" in table
    assert "| tiny | 2 · " in table  # the splits-and-wall-time row counts the two splits
    assert main(["uci-table", str(out), "--plot", str(tiny / "fig" / "uci.png")]) == 0
    assert "Test log-likelihood" in capsys.readouterr().out
    assert (tiny / "fig" / "uci.png").stat().st_size > 5000
    assert main(["uci", "--dataset", "nope", "--method", "mc-dropout", "--data-dir", str(tiny)]) == 2
    err = capsys.readouterr().err
    assert "not found" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    with pytest.raises(FileNotFoundError, match="not found"):  # --verbose: the exception itself
        main(["--verbose", "uci", "--dataset", "nope", "--method", "mc-dropout", "--data-dir", str(tiny)])
    (tiny / "empty").mkdir()
    assert main(["uci-table", str(tiny / "empty")]) == 2
    assert "no result files" in capsys.readouterr().err


def test_parse_splits():
    assert (
        parse_splits("0-3") == [0, 1, 2, 3]
        and parse_splits("2") == [2]
        and parse_splits("0,4-5") == [0, 4, 5]
    )


BAD_VALUES = [
    (["--splits", "5-2"], "the range 5-2 runs backwards"),
    (["--splits", "0-3,2"], r"split\(s\) \[2\] given more than once"),
    (["--splits", "0,x"], "use e.g. 0-19"),
    (["--num-samples", "0"], "--num-samples must be at least 1, got 0"),
    (["--epochs-multiplier", "0"], "--epochs-multiplier must be at least 1, got 0"),
    (["--epochs-multiplier", "1.5"], "--epochs-multiplier takes int values"),
    (["--hidden-layers", "0"], "--hidden-layers must be at least 1, got 0"),
    (["--threads", "0"], "expected a whole number >= 1, got 0"),
    (["--lr", "nan"], "--lr must be finite"),
    (["--concrete-tau", "fixed"], "--concrete-tau must be one of em, map"),
    (["--concrete-length-scales", "0.1,-1"], "--concrete-length-scales must be positive, got -1.0"),
    (["--dataset", "../x"], "is not a plain folder name"),
]


@pytest.mark.parametrize(("flags", "message"), BAD_VALUES, ids=[" ".join(f) for f, _ in BAD_VALUES])
def test_bad_values_are_refused_when_parsed(flags, message, capsys, tmp_path):
    """Each bad value stops the command at once with a message naming it (argparse's exit 2),
    before any data is read or any training starts."""
    base = {"--dataset": "bostonHousing", "--method": "mc-dropout", "--out": str(tmp_path / "out")}
    base.update(dict(zip(flags[::2], flags[1::2], strict=True)))
    with pytest.raises(SystemExit) as stop:
        main(["uci", *[x for kv in base.items() for x in kv]])
    assert stop.value.code == 2
    assert re.search(message, capsys.readouterr().err)
    assert not (tmp_path / "out").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without CUDA")
def test_cuda_without_cuda_is_refused_when_parsed(capsys):
    with pytest.raises(SystemExit):
        main(["uci", "--dataset", "bostonHousing", "--method", "mc-dropout", "--device", "cuda"])
    assert "CUDA is not available on this machine" in capsys.readouterr().err


@pytest.mark.parametrize("steps", ["0", "-5"])
def test_demo_refuses_no_steps(steps, capsys, tmp_path):
    with pytest.raises(SystemExit):
        main(["demo", "--steps", steps, "--out", str(tmp_path)])
    assert f"--steps must be at least 1, got {int(steps)}" in capsys.readouterr().err


def test_splits_beyond_the_data_set_are_refused_before_training(tiny, capsys):
    args = ["uci", "--dataset", "tiny", "--method", "mc-dropout", "--data-dir", str(tiny), "--splits", "2-3"]
    assert main([*args, "--out", str(tiny / "out")]) == 2
    assert "tiny has splits 0-2; got [3]" in capsys.readouterr().err
    assert not (tiny / "out").exists()


def test_download_without_network_says_so_in_one_line(tmp_path, capsys, monkeypatch):
    import urllib.error
    import urllib.request

    def offline(*args, **kwargs):
        raise urllib.error.URLError("Temporary failure in name resolution")

    monkeypatch.setattr(urllib.request, "urlopen", offline)
    assert main(["download-uci", "--dataset", "bostonHousing", "--data-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "could not fetch" in err[0] and "network" in err[0]


def test_the_command_says_what_it_is_and_its_version(capsys):
    from pyro_dropout import __version__
    from pyro_dropout_experiments.cli import build_parser

    with pytest.raises(SystemExit):
        main(["--version"])
    assert capsys.readouterr().out.strip() == f"pyro-dropout {__version__}"
    text = build_parser().format_help()
    assert "``" not in text and "examples:" in text and "mnist ood --quick" in text
    demo = build_parser()._subparsers._group_actions[0].choices["demo"]
    assert all(action.help for action in demo._actions)  # every demo option says what it is


def test_an_empty_out_is_refused(capsys, tmp_path, monkeypatch):
    """Before, ``--out ''`` wrote into the current folder and printed no "wrote" line."""
    monkeypatch.chdir(tmp_path)
    assert main(["synthetic", "--sizes", "10", "--steps", "2", "--quiet", "--out", ""]) == 2
    assert "--out is empty: give the folder to write to" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_a_misspelt_flag_is_named_by_its_command_with_the_closest_flag(capsys):
    """Before: "unrecognized arguments: --quik (pyro-dropout --help: the flags)", from the top."""
    with pytest.raises(SystemExit) as stop:
        main(["demo", "--quik"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "pyro-dropout demo: error: unknown argument '--quik'; did you mean '--quick'?" in err
    assert "(pyro-dropout demo --help: the flags)" in err
