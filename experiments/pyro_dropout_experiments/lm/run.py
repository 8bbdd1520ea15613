"""``pyro-dropout lm-uncertainty``: MC dropout on a LoRA-fine-tuned language model. A character-level
transformer is pretrained on the standard library's docstrings, its adapters fine-tuned on
PyTorch's (``MCDropout.fit``: DropoutELBO at a fixed rate, Concrete-learned rates, or BB-α), and
each variant scored with its own MC dropout: held-out perplexity and next-character ECE on PyTorch's
docstrings; the AUROC of the predictive entropy and the mutual information, per character and per
sequence (its characters' mean), at telling the other domain and shuffled text from it; the
adapters' rates. Writes ``results.json`` after every run (a rerun resumes) and ``lm.png``."""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pyro
import torch

from pyro_dropout import BBAlpha, MCDropout
from pyro_dropout.metrics import (
    accuracy,
    auroc,
    expected_calibration_error,
    negative_log_likelihood,
    uncertainty_scores,
)

from ..core import missing_runs, resume_runs, store_run
from ..core.progress import Progress
from .corpus import VOCABULARY, Domain, docstrings, sequences, shuffled
from .figure import lm_figure
from .model import CharLM, pretrain
from .settings import LMSettings

__all__ = ["Corpus", "ensemble_members", "finetune", "fresh_adapter", "run_ensemble", "run_lm", "run_variant"]

_WHICH = ("variants", "repeats", "members")  # members: checked run by run
SCORES = ("predictive_entropy", "mutual_information")


class Corpus:
    """The two domains cut into sequences of ``context + 1`` characters, split for a seed: the first
    domain's pretraining and held-out sequences, the second's fine-tuning and held-out ones, and the
    held-out ones shuffled."""

    def __init__(self, s: LMSettings, seed: int, domains: tuple[Domain, Domain] | None = None) -> None:
        first, second = domains or (docstrings("stdlib"), docstrings("torch"))
        self.digests = {first.name: first.digest, second.name: second.digest}
        generator = torch.Generator().manual_seed(seed)
        a, b = (_shuffled_rows(sequences(d, s.context + 1), generator) for d in (first, second))
        n = s.eval_sequences
        if len(a) < 2 * n or len(b) < n + 1:
            raise ValueError(
                f"lm-uncertainty: the corpus has {len(a)} and {len(b)} sequences of {s.context + 1} "
                f"characters; --eval-sequences {n} needs at least {2 * n} and {n + 1}"
            )
        self.pretraining, self.other = a[n:], a[:n]
        self.held_out, self.finetuning = b[:n], b[n : n + s.sequences]
        self.shuffled = shuffled(self.held_out, generator)


def _shuffled_rows(seqs: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    return seqs[torch.randperm(len(seqs), generator=generator)]


def _adapted(base: CharLM, s: LMSettings) -> torch.nn.Module:
    import peft  # the experiments' extra "lm"

    config = peft.LoraConfig(
        r=s.rank,
        lora_alpha=2 * s.rank,
        lora_dropout=s.lora_dropout,
        target_modules=["linear1", "linear2", "head"],
    )
    return peft.get_peft_model(copy.deepcopy(base), config).eval()


def fresh_adapter(variant: str, s: LMSettings, seed: int, base: CharLM) -> MCDropout:
    """The base model with fresh adapters (their initialisation from ``seed``) behind the front door."""
    pyro.set_rng_seed(seed)
    return MCDropout(_adapted(base, s), num_samples=s.draws, concrete=variant == "concrete")


def finetune(bnn: MCDropout, variant: str, s: LMSettings, corpus: Corpus) -> list[float]:
    """``MCDropout.fit`` of the adapters on the second domain: DropoutELBO, or BB-α for ``bbalpha``."""
    batches = [(b[:, :-1], b[:, 1:]) for b in corpus.finetuning.split(s.batch_size)]
    loss = BBAlpha(0.5) if variant == "bbalpha" else None
    return bnn.fit(batches, epochs=s.epochs, lr=s.finetune_lr, loss=loss, progress=False)


def _auroc(probs: Callable[[torch.Tensor], torch.Tensor], corpus: Corpus) -> dict[str, Any]:
    """The AUROC of each score, per character and per sequence, at telling the other domain and the
    shuffled text from the held-out text; ``probs(seqs)`` gives ``[T, M, L, V]``."""
    inside = _scores(probs(corpus.held_out))
    found: dict[str, Any] = {}
    for name, seqs in (("other domain", corpus.other), ("shuffled", corpus.shuffled)):
        outside = _scores(probs(seqs))
        found[name] = {
            level: {k: auroc(outside[level][k], inside[level][k]) for k in SCORES} for level in inside
        }
    return found


def _scores(probs: torch.Tensor) -> dict[str, dict[str, torch.Tensor]]:
    """Each character's and each sequence's entropy and mutual information, from ``[T, M, L, V]``."""
    tokens = uncertainty_scores(probs.reshape(probs.shape[0], -1, probs.shape[-1]))
    return {
        "character": {k: tokens[k] for k in SCORES},
        "sequence": {k: tokens[k].reshape(probs.shape[1], -1).mean(1) for k in SCORES},
    }


def _lora_rates(bnn: MCDropout) -> dict[str, float]:
    return {k: v for k, v in bnn.dropout_rates()["network"].items() if "lora_dropout" in k}


def run_variant(variant: str, s: LMSettings, seed: int, corpus: Corpus, base: CharLM) -> dict[str, Any]:
    """One variant's fine-tuning (none for ``pretrained``) and scores."""
    if variant == "ensemble":
        return run_ensemble(s, seed, corpus, base)
    bnn = fresh_adapter(variant, s, seed, base)
    start = time.perf_counter()
    history = finetune(bnn, variant, s, corpus) if variant != "pretrained" else []
    held = corpus.held_out
    report = bnn.evaluate(held[:, :-1], held[:, 1:])
    return {
        "perplexity": math.exp(report.nll),
        "nll": report.nll,
        "ece": report.ece,
        "accuracy": report.accuracy,
        "auroc": _auroc(lambda seqs: bnn.probs(seqs[:, :-1]), corpus),
        "rates": _lora_rates(bnn),
        "fit_loss": history,
        "finetuning_sequences": len(corpus.finetuning),
        "seconds": round(time.perf_counter() - start, 1),
    }


def ensemble_members(
    s: LMSettings, seed: int, corpus: Corpus, base: CharLM
) -> tuple[list[torch.nn.Module], list[float], dict[str, float], MCDropout]:
    """The deep ensemble's ``s.members`` networks, each with adapters fine-tuned as ``fixed`` from
    its own seed (``seed * members + m``: member 0 is the ``fixed`` run of the same seed) and its
    dropout off (``MCDropout.to_module``: the expected weights); their fit losses and rates, and
    member 0's front door (its MC dropout, to compare on the same base model)."""
    doors: list[MCDropout] = []
    history: list[float] = []
    for m in range(s.members):  # each fine-tuned right after its seed, as the ``fixed`` run is
        doors.append(fresh_adapter("fixed", s, seed * s.members + m, base))
        history += finetune(doors[-1], "fixed", s, corpus)
    return [bnn.to_module() for bnn in doors], history, _lora_rates(doors[0]), doors[0]


def run_ensemble(s: LMSettings, seed: int, corpus: Corpus, base: CharLM) -> dict[str, Any]:
    """The deep ensemble of adapters (:func:`ensemble_members`): its predictive is the members' mean,
    its mutual information their disagreement; scored as the other variants, the members in place of
    the dropout draws."""
    start = time.perf_counter()
    nets, history, rates, first = ensemble_members(s, seed, corpus, base)

    @torch.no_grad()
    def probs(seqs: torch.Tensor) -> torch.Tensor:
        return torch.stack([net(seqs[:, :-1]).softmax(-1) for net in nets])

    held = corpus.held_out
    flat = probs(held)
    flat = flat.reshape(len(nets), -1, flat.shape[-1])
    labels = held[:, 1:].reshape(-1)
    nll = negative_log_likelihood(flat, labels)
    alone = [math.exp(negative_log_likelihood(member, labels)) for member in flat]
    return {
        "perplexity": math.exp(nll),
        "member_perplexity": alone,  # each member alone, its dropout off
        # member 0 by its own MC dropout: the ``fixed`` variant on this run's base model
        "member_mc_perplexity": math.exp(first.evaluate(held[:, :-1], held[:, 1:]).nll),
        "nll": nll,
        "ece": expected_calibration_error(flat, labels),
        "accuracy": accuracy(flat, labels),
        "auroc": _auroc(probs, corpus),
        "rates": rates,
        "fit_loss": history,
        "members": s.members,
        "finetuning_sequences": len(corpus.finetuning),
        "seconds": round(time.perf_counter() - start, 1),
    }


def run_lm(s: LMSettings, out: str | Path, progress: bool = True) -> dict[str, Any]:
    """Every (variant, repeat), resumed run by run from ``out/results.json``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    results = resume_runs(out, asdict(s), _WHICH)
    for seed, run in results["runs"].get("ensemble", {}).items():
        if run.get("members") != s.members:
            raise ValueError(
                f"{out / 'results.json'}: its ensemble run of seed {seed} has {run.get('members')} "
                f"members, not --members {s.members}: give another --out to keep both, or the same "
                "--members to resume"
            )
    todo = missing_runs(results, s.variants, s.repeats, s.seed)
    bar = Progress(total=len(todo), disable=not progress, desc="lm-uncertainty runs")
    bases: dict[int, tuple[Corpus, CharLM, list[float]]] = {}
    for variant, seed in todo:
        if seed not in bases:  # one pretrained model per seed, shared by its variants
            corpus = Corpus(s, seed)
            torch.manual_seed(seed)
            base = CharLM(VOCABULARY, s.width, s.layers, s.heads, s.context, s.dropout)
            generator = torch.Generator().manual_seed(seed)
            losses = pretrain(base, corpus.pretraining, s.pretrain_steps, s.batch_size, s.lr, generator)
            bases[seed] = (corpus, base.eval(), losses)
        corpus, base, losses = bases[seed]
        record = run_variant(variant, s, seed, corpus, base)
        record["pretraining_loss"] = losses[-1] if losses else None
        record["corpus_sha256"] = corpus.digests
        store_run(out, results, variant, seed, record)
        bar.update()
    bar.close()
    lm_figure(results, out / "lm.png")
    return results
