"""MC-dropout generation for causal language models: each continuation one draw of the network's own
dropout held for the whole continuation, its first token distributed as the network's own MC
dropout gives it (the conformance battery's z-tests), the same seed the same continuations, the
scores equal to their definitions on a vocabulary small enough to enumerate."""

from __future__ import annotations

import copy
import itertools

import pytest
import torch
from torch import nn

from pyro_dropout import MCDropout
from pyro_dropout.nn.converted.held import HeldMasks

from ..nn.conformance import compare_draws


class CausalLM(nn.Module):
    """A user's own causal language model: ``forward(input_ids) -> logits``, no cache."""

    def __init__(self, vocab: int = 12, p: float = 0.2) -> None:
        super().__init__()
        self.embed, self.drop = nn.Embedding(vocab, 16), nn.Dropout(p)
        self.layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=p, batch_first=True)
        self.out = nn.Linear(16, vocab)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        size = input_ids.shape[1]
        causal = torch.triu(torch.full((size, size), float("-inf")), 1)
        return self.out(
            self.drop(self.layer(self.drop(self.embed(input_ids)), src_mask=causal, is_causal=True))
        )


def _hf(kind: str, dropout: float = 0.1) -> nn.Module:
    hf = pytest.importorskip("transformers", reason="Hugging Face transformers (an optional extra)")
    torch.manual_seed(0)
    if kind == "gpt2":
        config = hf.GPT2Config(
            vocab_size=12,
            n_embd=16,
            n_layer=2,
            n_head=2,
            n_positions=32,
            bos_token_id=0,
            eos_token_id=1,
            resid_pdrop=dropout,
            embd_pdrop=dropout,
            attn_pdrop=dropout,
        )
        return hf.GPT2LMHeadModel(config).eval()
    config = hf.LlamaConfig(
        vocab_size=12,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        attention_dropout=0.3,
        max_position_embeddings=32,
        bos_token_id=0,
        eos_token_id=1,
    )
    return hf.LlamaForCausalLM(config).eval()


def _network(name: str) -> nn.Module:
    if name == "own":
        torch.manual_seed(0)
        return CausalLM().eval()
    return _hf(name)


def _own_first_tokens(net: nn.Module, ids: torch.Tensor, draws: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The network's own MC dropout at the prompts' last position: its greedy token (one-hot) and
    that token's log-probability, ``draws`` passes (its dropout on)."""
    net = copy.deepcopy(net).train()
    with torch.no_grad():
        batch = ids.expand(draws, *ids.shape).reshape(draws * len(ids), -1)
        out = net(batch)
        logits = (out if isinstance(out, torch.Tensor) else out.logits)[:, -1].float()
    chosen = logits.argmax(-1)
    log_p = torch.log_softmax(logits, -1).gather(-1, chosen[:, None]).squeeze(-1)
    one_hot = nn.functional.one_hot(chosen, logits.shape[-1]).double()
    return one_hot.reshape(draws, len(ids), -1), log_p.reshape(draws, len(ids))


@pytest.mark.parametrize("name", ["own", "gpt2", "llama"])
def test_the_first_token_is_the_networks_own_mc_dropout(name):
    net = _network(name)
    ids = torch.tensor([[2, 5, 7, 3], [4, 4, 9, 10]])
    bnn = MCDropout(net, num_samples=1500)
    generated = bnn.generate(ids, max_new_tokens=1, score_samples=2, seed=1)
    lib_one_hot = nn.functional.one_hot(generated.tokens[..., 0], 12).double()
    torch.manual_seed(2)
    own_one_hot, own_log_p = _own_first_tokens(net, ids, 1500)
    assert compare_draws(lib_one_hot, own_one_hot).passed
    assert compare_draws(generated.draw_log_prob[..., 0], own_log_p, seed=1).passed


@pytest.mark.parametrize("name", ["own", "gpt2"])
def test_the_same_seed_gives_the_same_continuations(name):
    bnn = MCDropout(_network(name), num_samples=6)
    ids = torch.tensor([[2, 5, 7], [3, 3, 8]])
    first = bnn.generate(ids, max_new_tokens=5, do_sample=True, seed=4)
    again = bnn.generate(ids, max_new_tokens=5, do_sample=True, seed=4)
    other = bnn.generate(ids, max_new_tokens=5, do_sample=True, seed=5)
    assert torch.equal(first.tokens, again.tokens) and not torch.equal(first.tokens, other.tokens)
    assert torch.equal(first.scores.sequence_log_likelihood, again.scores.sequence_log_likelihood)
    assert first.sequences.shape == (6, 2, 8) and torch.equal(first.sequences[..., :3], ids.expand(6, -1, -1))


def test_held_masks_keep_each_positions_masks_as_the_prefix_grows():
    """Under HeldMasks a causal network's outputs at the positions already seen are the same when
    the prefix grows by a token (each position's masks drawn once), and a new mode is a new draw."""
    torch.manual_seed(0)
    net = CausalLM().train()
    ids = torch.randint(0, 12, (3, 6))
    held = HeldMasks()
    with torch.no_grad(), held:
        held.new_pass(3)
        short = net(ids[:, :5])
        held.new_pass(3)
        grown = net(ids)
    assert torch.allclose(grown[:, :5], short, atol=1e-5)
    with torch.no_grad(), HeldMasks() as other:
        other.new_pass(3)
        assert not torch.allclose(net(ids[:, :5]), short, atol=1e-3)


def test_the_sequence_scores_are_their_definitions_on_every_continuation():
    """A vocabulary of 3 and continuations of 2 tokens: all 9 scored under 5 draws. Each draw's
    masks are shared by a prompt's continuations, so the MC predictive over sequences sums to 1;
    the first position's entropy is the same for all of them (it sees the prompt only); the mutual
    information is not negative; without dropout the MC log-likelihood is the network's own."""
    torch.manual_seed(0)
    ids = torch.tensor([[0, 2], [1, 1]])
    every = torch.tensor(list(itertools.product(range(3), repeat=2)))  # [9, 2]
    continuations = every[:, None].expand(9, 2, 2)
    bnn = MCDropout(CausalLM(vocab=3).eval(), num_samples=5)
    scores = bnn.score_continuations(ids, continuations, seed=0)
    total = scores.sequence_log_likelihood.exp().sum(0)
    assert torch.allclose(total, torch.ones(2, dtype=total.dtype), atol=1e-5), total
    first = scores.token_entropy[:, :, 0]
    assert torch.allclose(first, first[:1].expand_as(first), atol=1e-5)
    assert bool((scores.token_mutual_information >= 0).all())
    assert scores.sequence_entropy.shape == (2,) and torch.allclose(
        scores.sequence_entropy, -scores.sequence_log_likelihood.mean(0)
    )
    plain = CausalLM(vocab=3, p=0.0).eval()
    exact = MCDropout(plain, num_samples=3).score_continuations(ids, continuations)
    with torch.no_grad():
        sequences = torch.cat([ids.expand(9, -1, -1), continuations], -1).reshape(18, 4)
        log_p = torch.log_softmax(plain(sequences), -1)[:, 1:3].gather(-1, sequences[:, 2:, None]).squeeze(-1)
    assert torch.allclose(exact.sequence_log_likelihood, log_p.sum(-1).reshape(9, 2).double(), atol=1e-5)
    assert torch.allclose(exact.token_mutual_information, torch.zeros(9, 2, 2), atol=1e-6)


def test_left_padding_and_its_mask_give_the_unpadded_prompts_continuation():
    """Without dropout a prompt padded on the left, with its attention mask, continues as itself
    unpadded (the mask and the positions reach the network); padding on the right is refused."""
    net = _hf("gpt2", dropout=0.0)
    bnn = MCDropout(net, num_samples=2)
    alone = bnn.generate(torch.tensor([[5, 7, 3]]), max_new_tokens=4).tokens
    padded = torch.tensor([[0, 0, 5, 7, 3], [2, 5, 7, 3, 9]])
    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])
    both = bnn.generate(padded, attention_mask=mask, max_new_tokens=4).tokens
    assert torch.equal(both[:, 0], alone[:, 0])
    with pytest.raises(ValueError, match=r"a prompt ends in padding; pad prompts on the left"):
        bnn.generate(padded, attention_mask=mask.flip(-1))


def test_stops_at_the_end_token_and_names_bad_arguments():
    bnn = MCDropout(_network("own"), num_samples=4)
    ids = torch.tensor([[2, 5, 7]])
    out = bnn.generate(ids, max_new_tokens=6, do_sample=True, eos_token_id=3, pad_token_id=0, seed=0)
    for row, length in zip(out.tokens.reshape(-1, 6), out.scores.lengths.reshape(-1), strict=True):
        assert bool((row[int(length) :] == 0).all()) and (int(length) == 6 or int(row[int(length) - 1]) == 3)
    with pytest.raises(ValueError, match="input_ids must be integer token ids"):
        bnn.generate(torch.randn(2, 3))
    with pytest.raises(ValueError, match="max_new_tokens must be a positive int"):
        bnn.generate(ids, max_new_tokens=0)
    with pytest.raises(ValueError, match="temperature must be positive"):
        bnn.generate(ids, do_sample=True, temperature=0)
    with pytest.raises(ValueError, match=r"generate: seed must be an int in \[0, 2\*\*63\)"):
        bnn.generate(ids, seed="x")
    with pytest.raises(ValueError, match=r"continuations must be token ids \[T, N, K\]"):
        bnn.score_continuations(ids, torch.zeros(3, 2, 2, dtype=torch.long))
    plain = nn.Sequential(nn.Embedding(12, 8), nn.Linear(8, 12))
    with pytest.raises(ValueError, match=r"generate: this front door was made with masks='shared'"):
        MCDropout(plain, masks="shared").generate(ids)
