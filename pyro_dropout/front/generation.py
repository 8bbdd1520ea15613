r"""MC-dropout generation for causal language models: ``T`` continuations of each prompt, each from
one draw of the network's own dropout held for the whole continuation, and their uncertainty.

**A draw.** The network's own MC dropout draws every element's mask at every pass; generating with
a key-value cache (a Hugging Face model's ``past_key_values``) computes each position once, so each
position's masks are drawn once, and the draw is held. A network without a cache (a user's
``forward(input_ids) -> logits``) computes its whole prefix again at every step, under
:class:`~pyro_dropout.nn.converted.held.HeldMasks`: the same masks for the positions already seen,
fresh ones for the new position. Either way, the ``T`` draws run together, one row each per prompt
(draw-major), where the network treats its rows apart (the front door's rows check), else one draw
at a time; ``chunk_size`` bounds the draws of one pass.

**The scores.** Each continuation is scored under ``S`` draws (``score_samples``, default ``T``) whose
masks are shared by all the continuations of a prompt (a draw is one function of the text): with
:math:`p_s(y_k \mid x, y_{<k})` the next-token distribution of draw ``s``,

* per token: the predictive :math:`\bar p = \frac1S \sum_s p_s`, its entropy :math:`H[\bar p]`, and
  the mutual information :math:`H[\bar p] - \frac1S \sum_s H[p_s]`;
* per continuation: the MC sequence log-likelihood
  :math:`\log \frac1S \sum_s \prod_k p_s(y_k \mid x, y_{<k})` (its tokens up to the first
  end-of-sequence token);
* per prompt: the predictive entropy over sequences estimated as minus the mean of the
  continuations' MC log-likelihoods (an estimate of the entropy where the continuations are
  sampled, ``do_sample=True``), the share of distinct continuations and their mean pairwise
  disagreement (the fraction of positions where two continuations differ).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from ..nn.converted.dropout_calls import FastDropout
from ..nn.converted.held import HeldMasks
from ..nn.converted.inputs import Inputs, repeat_rows
from ..nn.converted.own import network_output, rows_apart
from ..ops import check_seed, is_positive_int, log_mean_exp
from ..runtime import progress_bar

__all__ = ["Generation", "SequenceScores", "generate", "score"]


@dataclass
class SequenceScores:
    """The scores of ``T`` continuations of ``N`` prompts (``K`` tokens each) under ``S`` draws."""

    lengths: torch.Tensor  # [T, N]: each continuation's tokens, its end token included
    token_entropy: torch.Tensor  # [T, N, K]: the predictive entropy at each position
    token_mutual_information: torch.Tensor  # [T, N, K]
    sequence_log_likelihood: torch.Tensor  # [T, N]: log of the MC mean of the draws' probabilities
    sequence_entropy: torch.Tensor  # [N]: minus the mean of the continuations' MC log-likelihoods
    distinct: torch.Tensor  # [N]: the share of distinct continuations
    disagreement: torch.Tensor  # [N]: the mean over pairs of the share of positions that differ


@dataclass
class Generation:
    """``T`` continuations of ``N`` prompts (``K`` new tokens) and their :class:`SequenceScores`."""

    sequences: torch.Tensor  # [T, N, P + K]: the prompts and their continuations
    tokens: torch.Tensor  # [T, N, K]: the continuations (after an end token: the pad token)
    draw_log_prob: torch.Tensor  # [T, N, K]: each token's log-probability under the draw that chose it
    scores: SequenceScores


@dataclass(frozen=True)
class _Settings:
    num_samples: int
    max_new_tokens: int
    do_sample: bool
    temperature: float
    top_k: int | None
    eos_token_id: int | None
    pad_token_id: int
    chunk_size: int | None
    score_samples: int


class _Network:
    """The front door's network with its refined weights, called as a language model."""

    def __init__(self, front: Any) -> None:
        model = front.model
        self.source = model.source
        means = front.guide.median()
        self.weights = self.source.weights(means, {k: v.dim() for k, v in means.items()}, None)
        names = set(model.input_names)  # by name only: a forward's **kwargs may not take them
        self.keywords = {"attention_mask", "position_ids"} <= names
        self.takes_mask = "attention_mask" in names
        self.takes_cache_flag = "use_cache" in names
        # a key-value cache (Hugging Face's: ``cache``, before 5.x ``past_key_values``)
        found = [n for n in ("cache", "past_key_values") if n in names]
        self.cache = found[0] if found and self.takes_cache_flag else None

    def __call__(self, ids: torch.Tensor, mask: torch.Tensor | None, **extra: Any) -> Any:
        kwargs: dict[str, Any] = dict(extra)
        if mask is not None and self.takes_mask:
            kwargs["attention_mask"] = mask
            if self.keywords:
                kwargs.setdefault("position_ids", _positions(mask)[:, -ids.shape[1] :])
        if self.takes_cache_flag:
            kwargs.setdefault("use_cache", False)
        return torch.func.functional_call(self.source.source, self.weights, (ids,), kwargs)


def _positions(mask: torch.Tensor) -> torch.Tensor:
    """Position ids of a left-padded batch (Hugging Face's rule: the count of real tokens so far)."""
    positions = mask.long().cumsum(-1) - 1
    return positions.masked_fill(mask == 0, 1)


def _check(ids: Any, mask: Any, settings: _Settings) -> None:
    if not isinstance(ids, torch.Tensor) or ids.dim() != 2 or ids.is_floating_point() or not len(ids):
        raise ValueError(
            "MCDropout.generate: input_ids must be integer token ids [N, P], got "
            f"{getattr(ids, 'shape', ids)!r}"
        )
    if mask is not None:
        if not isinstance(mask, torch.Tensor) or mask.shape != ids.shape:
            raise ValueError(
                f"MCDropout.generate: attention_mask must have input_ids' shape {tuple(ids.shape)}, got "
                f"{getattr(mask, 'shape', mask)!r}"
            )
        if not bool(((mask == 0) | (mask == 1)).all()):
            raise ValueError("MCDropout.generate: attention_mask must hold 0 (padding) and 1 (tokens)")
        if not bool((mask[:, -1] == 1).all()):
            raise ValueError(
                "MCDropout.generate: a prompt ends in padding; pad prompts on the left "
                "(tokenizer.padding_side = 'left'), so that every continuation follows its last token"
            )
    for name in ("num_samples", "max_new_tokens", "score_samples"):
        if not is_positive_int(getattr(settings, name)):
            raise ValueError(
                f"MCDropout.generate: {name} must be a positive int, got {getattr(settings, name)!r}"
            )
    if not (isinstance(settings.temperature, int | float) and settings.temperature > 0):
        raise ValueError(f"MCDropout.generate: temperature must be positive, got {settings.temperature!r}")
    if settings.top_k is not None and not is_positive_int(settings.top_k):
        raise ValueError(f"MCDropout.generate: top_k must be a positive int or None, got {settings.top_k!r}")
    if settings.chunk_size is not None and not is_positive_int(settings.chunk_size):
        raise ValueError(
            f"MCDropout.generate: chunk_size must be a positive int, got {settings.chunk_size!r}"
        )


def _repeat(x: torch.Tensor | None, count: int) -> Any:
    """``count`` copies of the rows, draw-major (none of no mask)."""
    return None if x is None else repeat_rows(x, count)


def _pick(logits: torch.Tensor, settings: _Settings) -> torch.Tensor:
    """The next token of each row: the most probable, or a sample (temperature, top-k)."""
    if not settings.do_sample:
        return logits.argmax(-1)
    scaled = logits / settings.temperature
    if settings.top_k is not None and settings.top_k < scaled.shape[-1]:
        kth = scaled.topk(settings.top_k, -1).values[..., -1:]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    return torch.multinomial(torch.softmax(scaled.float(), -1), 1).squeeze(-1)


def _decode(
    net: _Network, ids: torch.Tensor, mask: torch.Tensor | None, settings: _Settings, bar: Any
) -> Any:
    """The continuations of the rows of ``ids`` (each row its own draw), and each token's
    log-probability under its draw: ``([R, K], [R, K])``."""
    tokens, log_probs = [], []
    done = torch.zeros(ids.shape[0], dtype=torch.bool, device=ids.device)
    held = None if net.cache else HeldMasks()
    past = None
    step_ids = ids
    with held if held is not None else FastDropout():
        for _ in range(settings.max_new_tokens):
            if held is not None:
                held.new_pass(ids.shape[0])
                out = net(ids, mask)
            else:
                extra: dict[str, Any] = {"use_cache": True}
                if past is not None:
                    extra[str(net.cache)] = past
                out = net(step_ids, mask, **extra)
                past = _cache_of(out)
            logits = network_output(out)[:, -1].float()
            chosen = _pick(logits, settings)
            if settings.eos_token_id is not None:
                chosen = chosen.masked_fill(done, settings.pad_token_id)
            log_probs.append(torch.log_softmax(logits, -1).gather(-1, chosen[:, None]).squeeze(-1))
            tokens.append(chosen)
            if settings.eos_token_id is not None:
                done = done | (chosen == settings.eos_token_id)
            step_ids = chosen[:, None]
            ids = torch.cat([ids, step_ids], 1)
            mask = None if mask is None else torch.cat([mask, mask.new_ones(mask.shape[0], 1)], 1)
            bar.update()
    return torch.stack(tokens, 1), torch.stack(log_probs, 1)


def _cache_of(out: Any) -> Any:
    """The key-value cache a Hugging Face model's output holds."""
    for name in ("cache", "past_key_values"):
        found = out.get(name) if isinstance(out, dict) else getattr(out, name, None)
        if found is not None:
            return found
    raise ValueError("MCDropout.generate: the network took use_cache=True but returned no cache")


def _lengths(tokens: torch.Tensor, eos: int | None) -> torch.Tensor:
    """Each continuation's tokens, its first end token included ``[..., K] -> [...]``."""
    size = tokens.shape[-1]
    if eos is None:
        return torch.full(tokens.shape[:-1], size, dtype=torch.long, device=tokens.device)
    ended = tokens == eos
    first = torch.where(
        ended.any(-1), ended.float().argmax(-1), torch.full_like(ended[..., 0], size - 1, dtype=torch.long)
    )
    return first + 1


@contextmanager
def _seeded(seed: int | None) -> Iterator[None]:
    if seed is None:
        yield
        return
    check_seed(seed, "MCDropout.generate")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def _draws_together(net: _Network, ids: torch.Tensor, mask: torch.Tensor | None) -> bool:
    """Whether the rows of a batch of prompts are apart in the network (its dropout off): then the
    draws of a chunk share a pass."""
    call = {"input_ids": ids} | ({} if mask is None or not net.takes_mask else {"attention_mask": mask})
    inputs = Inputs.of(call, (), list(call))

    def forward(rows: Inputs) -> Any:
        return net(rows.kwargs["input_ids"], rows.kwargs.get("attention_mask"))

    return rows_apart(net.source.source, inputs, forward) is None


_SCORE_BYTES = 2**28  # the logits of one scoring pass: about 256 MB


def _score(
    net: _Network, sequences: torch.Tensor, mask: torch.Tensor | None, prompt: int, draws: int
) -> dict:
    """Each continuation under ``draws`` draws shared by the continuations of a prompt, the
    continuations of a pass as many as keep its logits within ``_SCORE_BYTES``."""
    count, prompts, total = sequences.shape
    held = HeldMasks(groups=(draws, prompts))
    full = None if mask is None else torch.cat([mask, mask.new_ones(prompts, total - prompt)], 1)
    entropy, information, per_draw = [], [], []
    with held:
        chunk = count
        start = 0
        while start < count:
            size = min(chunk, count - start)
            part = sequences[start : start + size]  # [c, N, L]
            held.new_pass(draws * size * prompts)
            rows = _repeat(part.reshape(size * prompts, total), draws)
            masks = None if full is None else _repeat(full.repeat(size, 1), draws)
            logits = network_output(net(rows, masks))
            if start == 0:  # the first pass sizes the rest
                per_row = logits[0].numel() * 4 * 3
                chunk = max(1, _SCORE_BYTES // max(1, per_row * draws * prompts))
            log_p = torch.log_softmax(logits[:, prompt - 1 : total - 1].float(), -1)
            log_p = log_p.reshape(draws, size, prompts, total - prompt, -1)  # [S, c, N, K, V]
            probs = log_p.exp()
            mean = probs.mean(0)
            h_mean = -(mean * mean.clamp_min(1e-30).log()).sum(-1)
            h_each = -(probs * log_p).sum(-1).mean(0)
            entropy.append(h_mean)
            information.append((h_mean - h_each).clamp_min(0))
            chosen = part[:, :, prompt:].expand(draws, -1, -1, -1)
            per_draw.append(log_p.gather(-1, chosen[..., None]).squeeze(-1))  # [S, c, N, K]
            start += size
    return {
        "entropy": torch.cat(entropy),
        "information": torch.cat(information),
        "per_draw": torch.cat(per_draw, 1),  # [S, T, N, K]
    }


def _spread(tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The share of distinct continuations and their mean pairwise disagreement, per prompt: with
    :math:`c_{kv}` the continuations with token ``v`` at position ``k``, the pairs that differ there
    are :math:`T^2 - \\sum_v c_{kv}^2` of the :math:`T(T - 1)` ordered pairs."""
    count, prompts, size = tokens.shape
    distinct = torch.tensor([len(torch.unique(tokens[:, n], dim=0)) / count for n in range(prompts)])
    if count < 2:
        return distinct, torch.zeros(prompts, dtype=torch.float64)
    _, codes = torch.unique(tokens, return_inverse=True)  # token ids as 0..V'-1
    counts = torch.zeros(prompts, size, int(codes.max()) + 1, dtype=torch.float64)
    counts.scatter_add_(2, codes.permute(1, 2, 0), torch.ones(prompts, size, count, dtype=torch.float64))
    differ = (count**2 - counts.pow(2).sum(-1)) / (count * (count - 1))  # [N, K]
    return distinct, differ.mean(-1)


def _prepared(front: Any, ids: torch.Tensor, mask: torch.Tensor | None) -> tuple[Any, Any, _Network]:
    """The prompts on the front door's device, its guide set up, its network with refined weights."""
    if front.model.source is None:
        raise ValueError(
            "MCDropout.generate: this front door was made with masks='shared' (its layers replaced), "
            "which keeps no copy of the network to generate with: use the default masks='own'"
        )
    device = front.device
    ids = ids if device is None else ids.to(device)
    mask = mask if mask is None or device is None else mask.to(device)
    takes_mask = "attention_mask" in front.model.input_names
    front._ready({"input_ids": ids, "attention_mask": mask} if mask is not None and takes_mask else ids)
    return ids, mask, _Network(front)


def _settings(options: dict[str, Any]) -> _Settings:
    options["score_samples"] = options.get("score_samples") or options["num_samples"]
    eos, pad = options.get("eos_token_id"), options.get("pad_token_id")
    options["pad_token_id"] = pad if pad is not None else (eos if eos is not None else 0)
    return _Settings(**options)


def generate(
    front: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor | None, **options: Any
) -> Generation:
    """:meth:`MCDropout.generate <pyro_dropout.MCDropout.generate>`'s work (see the module's docs)."""
    seed, progress = options.pop("seed", None), options.pop("progress", None)
    settings = _settings(options)
    _check(input_ids, attention_mask, settings)
    ids, mask, net = _prepared(front, input_ids, attention_mask)
    count, prompts = settings.num_samples, ids.shape[0]
    with torch.no_grad(), _seeded(seed):
        together = _draws_together(net, ids, mask) if count > 1 else True
        chunk = (settings.chunk_size or count) if together else 1
        bar = progress_bar(progress, -(-count // chunk) * settings.max_new_tokens, "MCDropout.generate")
        parts = []
        for start in range(0, count, chunk):
            size = min(chunk, count - start)
            parts.append(_decode(net, _repeat(ids, size), _repeat(mask, size), settings, bar))
        bar.close()
        tokens = torch.cat([p[0] for p in parts]).reshape(count, prompts, -1)
        draw_log_prob = torch.cat([p[1] for p in parts]).reshape(count, prompts, -1)
        scores = _scores(net, ids, mask, tokens, settings.score_samples, settings.eos_token_id)
    sequences = torch.cat([ids.expand(count, -1, -1), tokens], -1)
    return Generation(sequences, tokens, draw_log_prob, scores)


def score(
    front: Any,
    input_ids: torch.Tensor,
    continuations: torch.Tensor,
    attention_mask: torch.Tensor | None,
    num_samples: int,
    eos_token_id: int | None,
    seed: int | None,
) -> SequenceScores:
    """:meth:`MCDropout.score_continuations <pyro_dropout.MCDropout.score_continuations>`'s work."""
    settings = _Settings(  # nothing is decoded: only the draws and the end token matter
        num_samples=num_samples,
        max_new_tokens=1,
        do_sample=False,
        temperature=1.0,
        top_k=None,
        eos_token_id=eos_token_id,
        pad_token_id=0,
        chunk_size=None,
        score_samples=num_samples,
    )
    _check(input_ids, attention_mask, settings)
    good = isinstance(continuations, torch.Tensor) and continuations.dim() == 3
    if not good or continuations.shape[1] != input_ids.shape[0] or continuations.is_floating_point():
        raise ValueError(
            "MCDropout.score_continuations: continuations must be token ids [T, N, K] for the "
            f"{len(input_ids)} prompts, got {getattr(continuations, 'shape', continuations)!r}"
        )
    ids, mask, net = _prepared(front, input_ids, attention_mask)
    with torch.no_grad(), _seeded(seed):
        return _scores(net, ids, mask, continuations.to(ids.device), num_samples, eos_token_id)


def _scores(
    net: _Network, ids: torch.Tensor, mask: Any, tokens: torch.Tensor, draws: int, eos: int | None
) -> SequenceScores:
    count = tokens.shape[0]
    sequences = torch.cat([ids.expand(count, -1, -1), tokens], -1)
    found = _score(net, sequences, mask, ids.shape[1], draws)
    lengths = _lengths(tokens, eos)
    valid = torch.arange(tokens.shape[-1], device=tokens.device) < lengths[..., None]
    per_draw = (found["per_draw"] * valid).sum(-1)  # [S, T, N]
    sequence_ll = log_mean_exp(per_draw.double(), 0)
    distinct, disagreement = _spread(tokens.cpu())
    return SequenceScores(
        lengths=lengths,
        token_entropy=found["entropy"],
        token_mutual_information=found["information"],
        sequence_log_likelihood=sequence_ll,
        sequence_entropy=-sequence_ll.mean(0),
        distinct=distinct,
        disagreement=disagreement,
    )
