"""MC-dropout generation: ``MCDropout.generate`` with T draws against T runs of the model's own
``generate`` with its dropout active (what a user writes without the library).

Run: python benchmarks/generation.py [--threads 1] [--quick]

Hugging Face causal language models built from their configs (random weights: the time does not
depend on them): a GPT-2 and a LLaMA-style model of 4 layers, width 128, a vocabulary of 2,000;
4 prompts of 16 tokens, 20 new tokens, greedy, T = 10 draws. The baseline is T calls of
``model.generate`` on the 4 prompts (``model.train()``: its dropout draws, its key-value cache
holds each position's); the library's draws run together (T x 4 rows) with the same cache, and
``generate`` then scores every continuation under T more draws (per-token entropy and mutual
information, sequence log-likelihoods), which the baseline does not do: the library's time is
shown with and without that scoring (``score_samples=1``: one scoring draw). Blocks interleaved;
medians.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from datetime import date
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine, write

from pyro_dropout import MCDropout

DRAWS, PROMPTS, PROMPT_LENGTH, NEW = 10, 4, 16, 20


def _model(kind: str) -> torch.nn.Module:
    import transformers as hf

    torch.manual_seed(0)
    if kind == "gpt2":
        config = hf.GPT2Config(vocab_size=2000, n_embd=128, n_layer=4, n_head=4, n_positions=64)
        return hf.GPT2LMHeadModel(config).eval()
    config = hf.LlamaConfig(
        vocab_size=2000,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        attention_dropout=0.1,
        max_position_embeddings=64,
    )
    return hf.LlamaForCausalLM(config).eval()


def _own(net: torch.nn.Module, ids: torch.Tensor) -> float:
    start = time.perf_counter()
    with torch.no_grad():
        for _ in range(DRAWS):
            net.generate(ids, max_new_tokens=NEW, min_new_tokens=NEW, do_sample=False, pad_token_id=0)
    return time.perf_counter() - start


def _library(bnn: MCDropout, ids: torch.Tensor, score_samples: int) -> float:
    start = time.perf_counter()
    bnn.generate(ids, num_samples=DRAWS, max_new_tokens=NEW, score_samples=score_samples, progress=False)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="2 blocks, GPT-2 only")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    blocks = 2 if args.quick else 5
    kinds = ["gpt2"] if args.quick else ["gpt2", "llama"]
    rows = {}
    for kind in kinds:
        net = _model(kind)
        own = copy.deepcopy(net).train()
        bnn = MCDropout(net, num_samples=DRAWS)
        ids = torch.randint(1, 2000, (PROMPTS, PROMPT_LENGTH), generator=torch.Generator().manual_seed(1))
        _library(bnn, ids, 1)  # set up (the guide, the rows check)
        times: dict[str, list[float]] = {
            "own generate x T": [],
            "library, scored": [],
            "library, 1 scoring draw": [],
        }
        for _ in range(blocks):
            times["own generate x T"].append(_own(own, ids))
            times["library, scored"].append(_library(bnn, ids, DRAWS))
            times["library, 1 scoring draw"].append(_library(bnn, ids, 1))
        medians = {k: statistics.median(v) for k, v in times.items()}
        base = medians["own generate x T"]
        print(f"{kind}: {DRAWS} draws x {PROMPTS} prompts, {NEW} new tokens, {blocks} blocks")
        for name, value in medians.items():
            print(f"  {name}: {value:.3f} s ({value / base:.2f}x the own generate)")
        rows[kind] = {
            "seconds": times,
            "medians": medians,
            "ratios": {k: v / base for k, v in medians.items()},
        }
    name = "generation_cpu" + ("_quick" if args.quick else "")
    setting = {"draws": DRAWS, "prompts": PROMPTS, "prompt_length": PROMPT_LENGTH, "new_tokens": NEW}
    write(
        name, {"machine": machine(torch.device("cpu")), "date": date.today().isoformat(), **setting, **rows}
    )


if __name__ == "__main__":
    main()
