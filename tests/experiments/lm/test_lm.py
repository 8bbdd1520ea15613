"""``pyro-dropout lm-uncertainty`` on tiny settings: the corpus, the model, the command and its
resumed rerun."""

import json

import pytest
import torch

from pyro_dropout_experiments.cli import main
from pyro_dropout_experiments.lm import CharLM, Domain, docstrings, sequences, shuffled

pytest.importorskip("peft")

TINY = ["--pretrain-steps", "5", "--sequences", "32", "--eval-sequences", "16", "--draws", "4"]
TINY += ["--width", "16", "--heads", "2", "--layers", "1", "--quiet"]


def test_the_corpus_is_the_installed_docstrings_cut_into_ascii_sequences():
    domain = docstrings("torch")
    assert "Applies" in domain.text and domain.text.isascii() and len(domain.digest) == 64
    seqs = sequences(Domain("x", "abcdefghij"), 4)
    assert seqs.tolist() == [[97, 98, 99, 100], [101, 102, 103, 104]]
    mixed = shuffled(seqs, torch.Generator().manual_seed(0))
    assert torch.equal(mixed.sort(1).values, seqs.sort(1).values)  # the same characters, reordered


def test_the_model_is_causal():
    torch.manual_seed(0)
    model = CharLM(128, 16, 1, 2, 8, 0.0).eval()
    ids = torch.randint(0, 128, (2, 8))
    changed = ids.clone()
    changed[:, 5:] = 0
    assert torch.allclose(model(ids)[:, :5], model(changed)[:, :5], atol=1e-5)


def test_the_command_writes_its_runs_and_figure_and_resumes(tmp_path, capsys):
    out = tmp_path / "lm"
    assert main(["lm-uncertainty", "--out", str(out), "--variants", "pretrained,concrete", *TINY]) == 0
    record = json.loads((out / "results.json").read_text())
    run = record["runs"]["concrete"]["0"]
    assert {"perplexity", "ece", "auroc", "rates", "corpus_sha256"} <= set(run)
    assert (
        set(run["auroc"]) == {"other domain", "shuffled"}
        and 0 <= run["auroc"]["shuffled"]["sequence"]["mutual_information"] <= 1
    )
    assert len(run["rates"]) == 3 and (out / "lm.png").is_file()
    assert record["runs"]["pretrained"]["0"]["fit_loss"] == []
    printed = capsys.readouterr().out
    assert "concrete (seed 0): perplexity" in printed
    assert main(["lm-uncertainty", "--out", str(out), "--variants", "pretrained,concrete", *TINY]) == 0
    assert json.loads((out / "results.json").read_text())["runs"] == record["runs"]  # resumed, nothing redone
