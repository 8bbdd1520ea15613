"""``pyro-dropout lm-uncertainty`` on tiny settings: the corpus, the model, the command and its
resumed rerun."""

import json

import pytest
import torch

from pyro_dropout_experiments.cli import main
from pyro_dropout_experiments.lm import CharLM, Corpus, Domain, docstrings, sequences, shuffled

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


def test_the_ensemble_members_are_the_fixed_runs_of_their_own_seeds():
    """Member m of seed 0 is the adapter the ``fixed`` variant fine-tunes from seed m: its weights
    equal that run's (bit for bit); the members differ, so their disagreement is not zero."""
    from pyro_dropout.metrics import mutual_information
    from pyro_dropout_experiments.lm import LMSettings
    from pyro_dropout_experiments.lm.run import ensemble_members, finetune, fresh_adapter

    s = LMSettings(width=16, heads=2, layers=1, pretrain_steps=5, sequences=32, eval_sequences=16)
    s = LMSettings(**{**s.__dict__, "draws": 4, "members": 2, "epochs": 1})
    corpus = Corpus(s, 0)
    torch.manual_seed(0)
    base = CharLM(128, s.width, s.layers, s.heads, s.context, s.dropout).eval()
    nets, history, rates, first = ensemble_members(s, 0, corpus, base)
    assert len(nets) == 2 and len(history) == 2 and set(rates.values()) == {s.lora_dropout}
    assert all(torch.equal(v, first.to_module().state_dict()[k]) for k, v in nets[0].state_dict().items())
    alone = fresh_adapter("fixed", s, 1, base)
    finetune(alone, "fixed", s, corpus)
    same = alone.to_module().state_dict()
    assert all(torch.equal(v, same[k]) for k, v in nets[1].state_dict().items())
    with torch.no_grad():
        probs = torch.stack([net(corpus.held_out[:, :-1]).softmax(-1) for net in nets])
    first = nets[0].state_dict()
    assert any(not torch.equal(v, first[k]) for k, v in same.items())  # adapters of their own seeds
    assert float(mutual_information(probs.reshape(2, -1, probs.shape[-1])).mean()) > 0  # 0 if equal


def test_a_resumed_ensemble_with_another_member_count_is_refused(tmp_path):
    out = tmp_path / "lm"
    tiny = [*TINY, "--repeats", "1", "--epochs", "1"]
    assert main(["lm-uncertainty", "--out", str(out), "--variants", "ensemble", "--members", "2", *tiny]) == 0
    run = json.loads((out / "results.json").read_text())["runs"]["ensemble"]["0"]
    assert run["members"] == 2 and 0 < run["ece"] < 1 and len(run["member_perplexity"]) == 2
    assert run["member_mc_perplexity"] > 1
    assert 1 < run["perplexity"] <= max(run["member_perplexity"])  # the mean predictive: no worse than all
    assert main(["lm-uncertainty", "--out", str(out), "--variants", "ensemble", "--members", "3", *tiny]) == 2
