"""The conformance battery's cases and its statistics: a converted network's MC predictive against
the network's own MC dropout (its dropout active, batch norm on its running statistics, every row
drawing its own masks), never against the library's own masks.

:func:`compare_draws` z-tests, for every output of every point, the difference of the two samples'
means and of their variances (the variance of a sample variance from its fourth moment), and the
same for one joint statistic per point (a fixed random projection of all of the point's outputs:
its tokens, pixels or classes together), Bonferroni-corrected to a family-wise level ``alpha``.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from . import conformance_sequence as seq
from . import conformance_vision as vis


@dataclass
class Case:
    make: Callable[[], nn.Module]
    x: Callable[[], torch.Tensor]
    task: str
    site: str  # the site of the library's predictions compared
    own: Callable[[torch.Tensor], torch.Tensor] = field(default=lambda out: out)  # the same from the net


def _trained(net: nn.Module) -> nn.Module:
    """As if trained: batch norm's running statistics away from their start."""
    for module in net.modules():
        if isinstance(module, nn.modules.batchnorm._BatchNorm):
            module.running_mean.uniform_(-0.5, 0.5)
            module.running_var.uniform_(0.5, 2)
    return net.eval()


def _tokens(n: int, t: int, vocab: int) -> Callable[[], torch.Tensor]:
    return lambda: torch.randint(0, vocab, (n, t))


def _normal(*shape: int) -> Callable[[], torch.Tensor]:
    return lambda: torch.randn(*shape)


def _tabular() -> torch.Tensor:
    return torch.cat([torch.randn(4, 3), torch.randint(0, 6, (4, 1)).float()], dim=1)


def _first(out: torch.Tensor) -> torch.Tensor:
    return out[..., 0]


def _hf(kind: str) -> nn.Module:
    import transformers as hf  # an optional extra: the cases skip where it is absent

    small = {"num_hidden_layers": 2, "num_attention_heads": 2}
    if kind == "bert":
        config = hf.BertConfig(
            vocab_size=40,
            hidden_size=16,
            intermediate_size=32,
            max_position_embeddings=16,
            num_labels=3,
            **small,
        )
        return hf.BertForSequenceClassification(config)
    if kind == "gpt2":
        config = hf.GPT2Config(vocab_size=30, n_embd=16, n_layer=2, n_head=2, n_positions=16)
        return hf.GPT2LMHeadModel(config)
    config = hf.ViTConfig(
        image_size=8,
        patch_size=4,
        num_channels=1,
        hidden_size=16,
        intermediate_size=32,
        num_labels=4,
        **small,
    )
    config.hidden_dropout_prob = config.attention_probs_dropout_prob = 0.1
    return hf.ViTForImageClassification(config)


def cases() -> dict[str, Case]:
    """Every architecture of the battery; ``make`` builds it (seeded by the caller)."""
    image = _normal(4, 1, 8, 8)
    found = {
        "token-mlp": Case(seq.TokenNet, _normal(4, 10, 8), "classification", "logits"),
        "mlp-mixer": Case(seq.Mixer, image, "classification", "logits"),
        "dropout-used-twice": Case(vis.DropoutTwice, _normal(4, 5), "classification", "logits"),
        "resnet-basic-blocks": Case(vis.ResNet, _normal(3, 3, 8, 8), "classification", "logits"),
        "mobilenet-depthwise": Case(vis.MobileNet, _normal(3, 3, 8, 8), "classification", "logits"),
        "unet-skip-dropout2d": Case(
            vis.UNet, image, "segmentation", "logits", lambda out: out.movedim(-3, -1)
        ),
        "text-cnn": Case(seq.TextCNN, _tokens(4, 7, 30), "classification", "logits"),
        "lstm-language-model": Case(seq.RNNModel, _tokens(3, 6, 20), "classification", "logits"),
        "transformer-encoder-attention": Case(
            seq.TransformerClassifier, _normal(3, 5, 8), "classification", "logits"
        ),
        "transformer-lm-time-first": Case(
            seq.TransformerModel, _tokens(3, 6, 20), "classification", "logits"
        ),
        "vit": Case(seq.ViT, image, "classification", "logits"),
        "sdpa-attention": Case(seq.SelfAttention, _normal(3, 5, 8), "classification", "logits"),
        "transformer-decoder-layer": Case(seq.DecoderNet, _normal(3, 5, 8), "regression", "mean", _first),
        "gru-two-layers": Case(seq.GRURegressor, _normal(4, 6, 3), "regression", "mean", _first),
        "embedding-lstm": Case(seq.TextLSTM, _tokens(4, 5, 20), "classification", "logits"),
        "mnist-net": Case(vis.MnistNet, _normal(4, 1, 12, 12), "classification", "logits"),
        "dropout2d-cnn": Case(vis.Dropout2dCNN, image, "classification", "logits"),
        "conv1d-batchnorm": Case(vis.Conv1dNet, _normal(4, 2, 10), "regression", "mean", _first),
        "functional-dropout-regression": Case(
            vis.FunctionalRegressor, _normal(5, 4), "regression", "mean", _first
        ),
        "looped-sequential-dropout": Case(vis.LoopedDropout, _normal(8, 8), "regression", "mean", _first),
        "unscaled-stochastic-depth": Case(vis.UnscaledDepth, _normal(6, 4), "regression", "mean", _first),
        "two-input-tabular": Case(
            lambda: vis.OneInput(vis.Tabular()), _tabular, "regression", "mean", _first
        ),
        "heteroscedastic-two-heads": Case(vis.TwoHeads, _normal(5, 2), "heteroscedastic", "mean", _first),
        "residual-mlp-reused-block": Case(vis.ResidualMLP, _normal(5, 3), "regression", "mean", _first),
        "trailing-dropout": Case(vis.trailing, _normal(5, 3), "classification", "logits"),
        "selu-alpha-dropout": Case(vis.selu_net, _normal(5, 4), "regression", "mean", _first),
        "rnn-inter-layer-dropout": Case(seq.ElmanRegressor, _normal(4, 6, 3), "regression", "mean", _first),
        "hf-bert": Case(lambda: _hf("bert"), _tokens(3, 8, 40), "classification", "logits"),
        "hf-gpt2": Case(lambda: _hf("gpt2"), _tokens(2, 6, 30), "classification", "logits"),
        "hf-vit": Case(lambda: _hf("vit"), _normal(3, 1, 8, 8), "classification", "logits"),
    }
    return found


def looped_sd_ratio(draws: int) -> float:
    """The median over inputs of the MC sd of ``MCDropout`` on :class:`LoopedDropout` (the issue's
    looped-``nn.Sequential`` idiom) over the network's own, ``draws`` passes each (its dropout on)."""
    from pyro_dropout import MCDropout

    torch.manual_seed(0)
    net, x = vis.LoopedDropout().eval(), torch.randn(8, 8)
    lib = MCDropout(net, "regression", tau=10.0).predict(x, num_samples=draws).means["obs"]
    net.train()
    with torch.no_grad():
        own = torch.stack([net(x) for _ in range(draws)]).squeeze(-1)
    return float((lib.std(0) / own.std(0)).median())


def front_options(task: str) -> dict[str, Any]:
    """``MCDropout``'s settings for a case: a regression's noise level given (the draws compared are
    the mean's, which it does not touch; a front door assumes none)."""
    return {"tau": 1.0} if task == "regression" else {}


def build(case: Case, seed: int) -> tuple[nn.Module, torch.Tensor]:
    torch.manual_seed(seed)
    return _trained(case.make()), case.x()


def _outputs(out: Any) -> torch.Tensor:
    return out if isinstance(out, torch.Tensor) else out.logits


def own_draws(net: nn.Module, x: torch.Tensor, draws: int, chunk: int = 250) -> torch.Tensor:
    """The network's own MC dropout: ``draws`` passes, its dropout on, batch norm on its statistics,
    every row drawing its own masks (the rows of ``x`` repeated, ``chunk`` passes at a time)."""
    net = copy.deepcopy(net).train()
    for module in net.modules():
        if isinstance(module, nn.modules.batchnorm._BatchNorm):
            module.eval()
    outs = []
    with torch.no_grad():
        for start in range(0, draws, chunk):
            count = min(chunk, draws - start)
            batch = x.expand(count, *x.shape).reshape(count * len(x), *x.shape[1:])
            out = _outputs(net(batch))
            outs.append(out.reshape(count, len(x), *out.shape[1:]))
    return torch.cat(outs)


def eval_output(net: nn.Module, x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return _outputs(copy.deepcopy(net).eval()(x))


@dataclass
class Comparison:
    max_z: float  # the largest |z| of all the tests
    threshold: float  # Bonferroni's bound for the family-wise level
    tests: int
    sd_ratio: float  # the median over outputs of sd(library) / sd(own)
    worst: str  # which test gave max_z

    @property
    def passed(self) -> bool:
        return self.max_z <= self.threshold


def _z_mean(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    se = (a.var(0) / len(a) + b.var(0) / len(b)).sqrt()
    return (a.mean(0) - b.mean(0)) / se.clamp_min(1e-30)


def _z_var(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    def parts(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        centred = t - t.mean(0)
        var = centred.pow(2).mean(0)
        return var, (centred.pow(4).mean(0) - var.pow(2)).clamp_min(0) / len(t)

    (va, sa), (vb, sb) = parts(a), parts(b)
    return (va - vb) / (sa + sb).sqrt().clamp_min(1e-30)


def compare_draws(lib: torch.Tensor, own: torch.Tensor, alpha: float = 1e-3, seed: int = 0) -> Comparison:
    """z-tests of the two samples ``[T, N, ...]``: every output's mean and variance, and one joint
    statistic per point; Bonferroni at the family-wise level ``alpha``."""
    lib, own = (t.double().reshape(*t.shape[:2], -1) for t in (lib, own))  # [T, N, K]
    generator = torch.Generator().manual_seed(seed)
    weights = torch.randn(lib.shape[1:], generator=generator, dtype=torch.float64)
    joint_lib, joint_own = (lib * weights).sum(-1), (own * weights).sum(-1)  # [T, N]
    varies = (lib.var(0) > 1e-12) | (own.var(0) > 1e-12)
    if not bool(varies.all()):  # outputs no dropout reaches: the same value in both
        fixed = ~varies
        gap = (lib.mean(0) - own.mean(0)).abs()[fixed].max()
        assert float(gap) <= 1e-4 * max(1.0, float(own.abs().max())), f"a fixed output differs by {gap}"
    z = {
        "mean": _z_mean(lib, own)[varies],
        "sd": _z_var(lib, own)[varies],
        "joint mean": _z_mean(joint_lib, joint_own),
        "joint sd": _z_var(joint_lib, joint_own),
    }
    tests = sum(t.numel() for t in z.values())
    threshold = float(torch.special.ndtri(torch.tensor(1 - alpha / (2 * tests), dtype=torch.float64)))
    worst = max(z, key=lambda k: float(z[k].abs().max()) if z[k].numel() else 0.0)
    ratio = (lib.std(0) / own.std(0))[varies].median()
    return Comparison(
        float(z[worst].abs().max()), threshold, tests, float(ratio) if varies.any() else math.nan, worst
    )
