"""The conformance battery: each converted network's MC predictive is the network's own MC dropout.

For every architecture of :mod:`tests.nn.conformance` (30, Hugging Face's skipped where
``transformers`` is absent), ``MCDropout(net)`` given the network as it is:
(b) 2,000 draws against 2,000 of the network's own passes in MC dropout (its dropout on, batch norm
    on its running statistics, every row drawing its own masks): z-tests on the mean and the sd of
    every output and of one joint statistic per point, Bonferroni-corrected to 0.1% family-wise
    (seeds fixed);
(a) the expected weights give ``net.eval()(x)`` (1e-5);
(c) a point predicted alone has the distribution of the same point inside a batch (the same tests).
The statistics can fail: a dropout shared over a point's tokens, or at another rate, is rejected.
"""

from __future__ import annotations

import pyro
import pytest
import torch
from torch import nn

from pyro_dropout import MCDropout, predict_standard

from .conformance import build, cases, compare_draws, eval_output, front_options, looped_sd_ratio, own_draws

CASES = cases()
DRAWS = 2000


def _case(name: str):
    if name.startswith("hf-"):
        pytest.importorskip("transformers", reason="Hugging Face transformers (an optional extra)")
    return CASES[name]


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CASES))
def test_b_c_the_mc_predictive_is_the_networks_own_mc_dropout(name):
    case = _case(name)
    net, x = build(case, seed=0)
    pyro.set_rng_seed(1)
    bnn = MCDropout(net, case.task, num_samples=DRAWS, **front_options(case.task))
    lib = bnn.predict(x).samples[case.site]
    torch.manual_seed(2)
    own = case.own(own_draws(net, x, DRAWS))
    result = compare_draws(lib, own)
    assert result.passed, result
    assert 0.9 < result.sd_ratio < 1.1, result
    alone = bnn.predict(x[:1]).samples[case.site]
    assert compare_draws(alone, lib[:, :1], seed=1).passed


@pytest.mark.parametrize("name", list(CASES))
def test_a_the_expected_weights_are_the_network_in_eval_mode(name):
    case = _case(name)
    net, x = build(case, seed=0)
    bnn = MCDropout(net, case.task, **front_options(case.task))
    bnn.predict(x[:2], num_samples=2)  # sets the guide up
    standard = predict_standard(bnn.model, bnn.guide, x).samples[case.site][0]
    expected = case.own(eval_output(net, x))
    assert torch.allclose(standard, expected, atol=1e-5), (standard - expected).abs().max()
    said = bnn.explain()  # the route of the draws (their own forward, all rows or one pass each)
    shape = ", ".join(map(str, x.shape[1:2]))
    assert f"inputs [N, {shape}" in said and "the network's own forward" in said, said


def test_the_issues_token_net_has_the_networks_own_sd():
    """The per-token MLP of the issue: the library's sd of the class probabilities was 2.12 times the
    network's own (one mask per input unit, shared by a point's tokens); now 1 within 0.05."""
    torch.manual_seed(0)
    net = _token_net()
    x = torch.randn(4, 10, 8)
    lib = MCDropout(net, "classification", num_samples=4000).predict(x).probs["obs"]
    net.train()
    with torch.no_grad():
        own = torch.softmax(net(x.repeat(4000, 1, 1)), -1).view(4000, 4, 3)
    assert abs(float((lib.std(0) / own.std(0)).median()) - 1) < 0.05


def _token_net() -> nn.Module:
    from .conformance_sequence import TokenNet

    return TokenNet().eval()


class _SharedOverTokens(nn.Module):
    """What the library did before: a mask per input unit, shared by the tokens of a point."""

    def __init__(self, p: float) -> None:
        super().__init__()
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        keep = torch.rand(x.shape[0], 1, x.shape[-1]) >= self.p
        return x * keep / (1 - self.p)


@pytest.mark.parametrize("wrong", ["masks shared over tokens", "another rate"])
def test_the_statistics_reject_a_predictive_of_another_distribution(wrong):
    torch.manual_seed(0)
    net, x = _token_net(), torch.randn(4, 10, 8)
    own = own_draws(net, x, DRAWS)
    other = _token_net()
    other.load_state_dict(net.state_dict())
    other.drop = _SharedOverTokens(0.5) if wrong == "masks shared over tokens" else nn.Dropout(0.4)
    result = compare_draws(own_draws(other, x, DRAWS), own)
    assert not result.passed, result
    same = compare_draws(own_draws(net, x, DRAWS), own)  # and two of the network's own samples agree
    assert same.passed, same


def test_the_issues_looped_dropout_net_has_the_networks_own_sd():
    """The loop over an nn.Sequential with F.dropout after each layer that is not an nn.Linear: its
    converted layers' classes made the loop drop after every layer (an sd 1.45 times the network's
    own); the draws now run the network's own forward, and the ratio is 1 within 0.05."""
    assert abs(looped_sd_ratio(4000) - 1) < 0.05
