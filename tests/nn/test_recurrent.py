"""Recurrent layers with variational dropout: masks tied over time (a pass with a fixed draw is
PyTorch's LSTM / GRU with the masked weights; per-example masks are one per sequence), the KL
counted once per weight whatever the length, and shapes under particles and draws."""

import pyro
import pyro.distributions as dist
import pytest
import torch
from pyro import poutine
from pyro.infer import SVI
from pyro.nn import PyroModule
from pyro.poutine.util import prune_subsample_sites

from pyro_dropout import DropoutGuide, predict
from pyro_dropout.infer import BBAlpha, DropoutELBO
from pyro_dropout.infer.loss_terms import latent_penalty
from pyro_dropout.nn import GRU, LSTM, Linear
from pyro_dropout.nn.masking import per_example_masks


class Forecaster(PyroModule):
    """The last hidden state of a recurrent layer, read out to a Normal mean."""

    def __init__(self, kind=LSTM, layers=1, hidden=6):
        super().__init__()
        self.rnn = kind(2, hidden, layers, batch_first=True)
        self.head = Linear(hidden, 1)

    def forward(self, x, y=None):
        out, _ = self.rnn(x)
        mean = self.head(out[..., -1, :]).squeeze(-1)
        with pyro.plate("data", x.shape[-3]):
            return pyro.sample("obs", dist.Normal(mean, 0.5), obs=y)


def _data(n=5, steps=7):
    g = torch.Generator().manual_seed(0)
    return torch.randn(n, steps, 2, generator=g), torch.randn(n, generator=g)


def _torch_twin(kind, layer, values):
    """``torch.nn.LSTM`` / ``GRU`` with the weights of one draw of ``layer`` (sites ``values``)."""
    net = getattr(torch.nn, kind.__name__)(
        layer.input_size, layer.hidden_size, layer.num_layers, batch_first=True
    )
    with torch.no_grad():
        for k in range(layer.num_layers):
            prefix = f"rnn.layers.{k}"
            getattr(net, f"weight_ih_l{k}").copy_(values[f"{prefix}.ih.weight"])
            getattr(net, f"weight_hh_l{k}").copy_(values[f"{prefix}.hh.weight"])
            getattr(net, f"bias_ih_l{k}").copy_(values[f"{prefix}.ih.bias"])
            hh_bias = values.get(f"{prefix}.hh.bias")
            getattr(net, f"bias_hh_l{k}").copy_(
                torch.zeros(net.hidden_size * (4 if kind is LSTM else 3)) if hh_bias is None else hh_bias
            )
    return net


@pytest.mark.parametrize("kind", [LSTM, GRU])
@pytest.mark.parametrize("layers", [1, 2])
def test_a_fixed_draw_is_pytorchs_layer_with_the_masked_weights_at_every_step(kind, layers):
    pyro.set_rng_seed(0)
    model = Forecaster(kind, layers)
    guide = DropoutGuide(model, dropout=0.5)
    x, y = _data()
    latents = poutine.trace(guide).get_trace(x, y)
    values = {n: s["value"] for n, s in latents.nodes.items() if s["type"] == "sample"}
    assert bool((values["rnn.layers.0.hh.weight"] == 0).any())  # hidden units dropped in this draw
    out, _ = poutine.replay(model.rnn, trace=latents)(x)
    expected, _ = _torch_twin(kind, model.rnn, values)(x)
    assert torch.allclose(out, expected, atol=1e-5)


def test_per_example_masks_are_one_per_sequence_reused_at_every_step():
    pyro.set_rng_seed(1)
    layer = GRU(2, 4, batch_first=True)
    x = torch.randn(3, 6, 2)
    with poutine.trace() as tape:
        layer(x)
    means = {n: s["value"] for n, s in tape.trace.nodes.items() if s["type"] == "sample"}
    guide_family = DropoutGuide(layer, dropout=0.5)
    guide_family(x)
    families = {n: guide_family.family(n) for n in ("layers.0.ih.weight", "layers.0.hh.weight")}
    keeps = {}
    with per_example_masks({n: (q, means[n]) for n, q in families.items()}) as registry:
        replayed = poutine.condition(layer, data=means)
        torch.manual_seed(5)
        out, _ = replayed(x)
    assert all(m.uses == 1 for m in registry.values())  # each weight's mask taken once
    torch.manual_seed(5)  # the same two masks, drawn in the same order: inputs, then hidden units
    keeps["ih"] = families["layers.0.ih.weight"].scaled_keep_with(torch.Size((3, 2)), 0.5)
    keeps["hh"] = families["layers.0.hh.weight"].scaled_keep_with(torch.Size((3, 4)), 0.5)
    h = torch.zeros(3, 4)
    w_ih, w_hh = means["layers.0.ih.weight"], means["layers.0.hh.weight"]
    b_ih, b_hh = means["layers.0.ih.bias"], means["layers.0.hh.bias"]
    for t in range(6):  # by hand: each sequence's masks at every step
        cell = torch.nn.functional.linear
        r_x, z_x, n_x = cell(x[:, t] * keeps["ih"], w_ih, b_ih).chunk(3, -1)
        r_h, z_h, n_h = cell(h * keeps["hh"], w_hh, b_hh).chunk(3, -1)
        r, z = torch.sigmoid(r_x + r_h), torch.sigmoid(z_x + z_h)
        h = (1 - z) * torch.tanh(n_x + r * n_h) + z * h
        assert torch.allclose(out[:, t], h, atol=1e-5)


def test_the_kl_counts_each_weight_once_whatever_the_length():
    pyro.set_rng_seed(2)
    model = Forecaster(LSTM, 2)
    guide = DropoutGuide(model, dropout=0.3)
    penalties = []
    for steps in (3, 12):
        x, y = _data(steps=steps)
        guide_trace = poutine.trace(guide).get_trace(x, y)
        model_trace = prune_subsample_sites(
            poutine.trace(poutine.replay(model, trace=guide_trace)).get_trace(x, y)
        )
        penalties.append(float(latent_penalty(model_trace, guide_trace).detach()))
    assert penalties[0] == pytest.approx(penalties[1], rel=1e-6)


@pytest.mark.parametrize(
    "loss",
    [
        DropoutELBO(num_particles=3),
        DropoutELBO(num_particles=3, per_example_masks=True),
        BBAlpha(0.5, num_particles=4, per_example_masks=True),
    ],
    ids=["elbo", "elbo-per-example", "bbalpha"],
)
@pytest.mark.parametrize("concrete", [False, True])
def test_training_steps_under_particles_and_prediction_under_draws(loss, concrete):
    pyro.clear_param_store()
    pyro.set_rng_seed(3)
    model = Forecaster(LSTM, 2)
    guide = DropoutGuide(model, concrete=concrete, **({} if concrete else {"dropout": 0.2}))
    x, y = _data()
    svi = SVI(model, guide, pyro.optim.Adam({"lr": 1e-2}), loss)
    losses = [svi.step(x, y) for _ in range(3)]
    assert all(torch.isfinite(torch.tensor(losses)))
    pred = predict(model, guide, x, num_samples=8)
    assert pred["obs"].shape == (8, 5)
    out, (h, c) = poutine.replay(model.rnn, trace=poutine.trace(guide).get_trace(x, y))(x)
    assert out.shape == (5, 7, 6) and h.shape == c.shape == (2, 5, 6)


@pytest.mark.parametrize("kind", [LSTM, GRU])
def test_time_major_inputs_and_bad_inputs(kind):
    layer = kind(2, 3)
    out, state = layer(torch.randn(7, 4, 2))
    assert out.shape == (7, 4, 3) and state[0].shape == (1, 4, 3)
    with pytest.raises(ValueError, match=r"expected inputs \[..., T, N, 2\]"):
        layer(torch.randn(7, 4, 5))
    with pytest.raises(ValueError, match="hidden_size must be a positive int"):
        kind(2, 0)


def test_pyros_own_predictive_draws_the_recurrent_weights_in_parallel():
    pyro.clear_param_store()
    pyro.set_rng_seed(4)
    model = Forecaster(GRU, 2)
    guide = DropoutGuide(model, dropout=0.2)
    x, y = _data()
    guide(x, y)
    samples = pyro.infer.Predictive(model, guide=guide, num_samples=6, parallel=True)(x)
    assert samples["obs"].shape == (6, 5)
    assert float(samples["obs"].std(0).min()) > 0
