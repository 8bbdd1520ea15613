"""The fast paths of a converted network's prediction give what the slow ones give: the library's
Bernoulli draws for element and channel dropout (torch's distribution), the inverse-CDF categorical
draws (torch's), and the recurrent layers on torch's fused kernels (the Python loop's numbers).
Tolerances: 4.5 standard errors for frequencies (seeded), 1e-5 for numbers."""

from __future__ import annotations

import pyro
import pytest
import torch
import torch.nn.functional as F
from pyro import poutine

from pyro_dropout import DropoutGuide
from pyro_dropout.distributions import Categorical
from pyro_dropout.nn import GRU, LSTM
from pyro_dropout.nn.converted.dropout_calls import FastDropout

from .test_recurrent import Forecaster


def _kept(t: torch.Tensor) -> float:
    return float((t != 0).double().mean())


@pytest.mark.parametrize("p", [0.1, 0.5])
def test_element_dropout_keeps_each_element_with_one_minus_p_scaled(p):
    torch.manual_seed(0)
    x = torch.ones(200_000)
    with FastDropout():
        out = F.dropout(x, p)
    se = (p * (1 - p) / x.numel()) ** 0.5
    assert abs(_kept(out) - (1 - p)) < 4.5 * se
    assert torch.allclose(out[out != 0], torch.full_like(out[out != 0], 1 / (1 - p)))


def test_channel_dropout_masks_whole_channels_and_inplace_writes_in_place():
    torch.manual_seed(1)
    x = torch.ones(400, 50, 3, 3)
    with FastDropout():
        out = F.dropout2d(x, 0.3)
        same = torch.ones(10, 4)
        result = F.dropout(same, 0.5, inplace=True)
    per_channel = out.flatten(2)
    assert torch.equal(per_channel.amin(-1), per_channel.amax(-1))  # a channel is kept or dropped whole
    se = (0.3 * 0.7 / (400 * 50)) ** 0.5
    assert abs(_kept(per_channel[..., 0]) - 0.7) < 4.5 * se
    assert result is same


@pytest.mark.parametrize("classes", [4, 12], ids=["few-classes-summed", "many-classes-scanned"])
def test_the_inverse_cdf_draws_have_the_categorical_distribution(classes):
    torch.manual_seed(2)
    logits = torch.randn(2, classes) * 2
    logits[1, -1] = -30.0  # a class of (almost) no probability
    draws = Categorical(logits=logits).sample(torch.Size([100_000]))  # [S, 2]
    probs = torch.softmax(logits, -1)
    for row in range(2):
        freq = torch.bincount(draws[:, row], minlength=classes).double() / len(draws)
        se = (probs[row] * (1 - probs[row]) / len(draws)).sqrt()
        assert bool(((freq - probs[row]).abs() < 4.5 * se + 1e-12).all()), (freq, probs[row])
    assert torch.allclose(Categorical(logits=logits).probs, probs, atol=1e-6)


@pytest.mark.parametrize("kind", [LSTM, GRU])
def test_the_fused_recurrent_kernel_gives_the_python_loops_numbers(kind):
    """One draw's weights run on torch's kernel; the same weights with a draw dim of one run the
    library's loop over time steps."""
    pyro.set_rng_seed(0)
    model = Forecaster(kind, layers=2)
    guide = DropoutGuide(model, dropout=0.3)
    x, y = torch.randn(5, 7, 2), torch.randn(5)
    latents = poutine.trace(guide).get_trace(x, y)
    native, _ = poutine.replay(model.rnn, trace=latents)(x)
    with pyro.plate("draw", 1, dim=-2):
        batched = poutine.trace(guide).get_trace(x, y)
    for name, site in latents.nodes.items():
        if site["type"] == "sample" and name in batched.nodes:
            batched.nodes[name]["value"] = site["value"].unsqueeze(0)  # the same draw, batched
    looped, _ = poutine.replay(model.rnn, trace=batched)(x)
    assert torch.allclose(looped.reshape(native.shape), native, atol=1e-5)
