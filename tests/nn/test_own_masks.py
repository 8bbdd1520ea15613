"""from_module's two ways of drawing masks: the network's own (``masks="own"``, the default) and one
mask per draw shared by its rows (``masks="shared"``), which refuses by name what a shared mask
cannot be; and what the default path must survive: the model's eval mode, many chunks on a skip
network, vectorised particles on residual networks, the guide's rates."""

from __future__ import annotations

import re

import pyro
import pytest
import torch
from pyro.infer import SVI
from torch import nn

from pyro_dropout import BBAlpha, DropoutELBO, DropoutGuide, MCDropout, predict
from pyro_dropout.nn import from_module

from .conformance_sequence import PositionalEncoding, TokenNet, TransformerClassifier
from .conformance_vision import DropoutTwice, ResNet, UNet


def test_model_eval_leaves_the_networks_dropout_on():
    """Lightning's validation calls model.eval(): the network keeps its MC-dropout modes."""
    torch.manual_seed(0)
    bnn = MCDropout(
        nn.Sequential(nn.Linear(3, 16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 1)), "regression", tau=1.0
    )
    x = torch.randn(4, 3)
    bnn.predict(x[:2], num_samples=2)
    bnn.model.eval()
    assert bnn.predict(x, num_samples=50).means["obs"].std(0).min() > 0


@pytest.mark.parametrize(
    ("make", "x", "words"),
    [
        (TokenNet, torch.randn(3, 5, 8), "masks its inputs, which are [N, positions..., 32]"),
        (DropoutTwice, torch.randn(3, 5), "the dropout 'dropout' is called 2 times"),
        (TransformerClassifier, torch.randn(3, 5, 8), "'encoder.layers.0.self_attn' (nn.MultiheadAttention)"),
    ],
    ids=["tokens", "module-called-twice", "attention-dropout"],
)
def test_shared_masks_refuse_what_they_cannot_be_and_own_masks_convert(make, x, words):
    torch.manual_seed(0)
    net = make().eval()
    with pytest.raises(ValueError, match=re.escape(words)):
        MCDropout(net, "classification", masks="shared").predict(x, num_samples=3)
    assert MCDropout(net, "classification").predict(x, num_samples=3).probs["obs"].shape[:2] == (3, 3)


class _TimeFirst(nn.Module):
    """Positional dropout on [T, N, D] (pytorch/examples' TransformerModel), given [N, T, D]."""

    def __init__(self) -> None:
        super().__init__()
        self.pos, self.head = PositionalEncoding(8, 0.3), nn.Linear(8, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.pos(x.transpose(0, 1)).mean(0))


def test_a_time_first_dropout_is_refused_with_shared_masks_and_exact_with_its_own():
    torch.manual_seed(0)
    net, x = _TimeFirst().eval(), torch.randn(6, 4, 8)
    with pytest.raises(ValueError, match=r"sees an input of shape \(4, 2, 8\) whose dim 0 is not the batch"):
        MCDropout(net, "classification", masks="shared").predict(x, num_samples=3)
    for rows in (2, 6):  # any batch size (before: sized from the 2-row set-up)
        bnn = MCDropout(net, "classification")
        assert bnn.predict(x[:rows], num_samples=3).probs["obs"].shape == (3, rows, 2)


def test_an_unseen_dropout_call_is_refused_with_shared_masks():
    """A dropout inside a module torch.fx does not enter draws masks of its own, per row."""

    class Opaque(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc, self.out = nn.Linear(3, 8), nn.Linear(8, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = torch.relu(self.fc(x))
            if float(h.sum()) > -1e9:  # data-dependent: torch.fx cannot follow it
                h = torch.nn.functional.dropout(h, 0.2, self.training)
            return self.out(h)

    with pytest.warns(UserWarning, match="could not trace"):
        model = from_module(Opaque(), "categorical", masks="shared")
    with pytest.raises(ValueError, match=r"calls dropout with a drop rate of 0\.2 where the conversion"):
        DropoutGuide(model)(torch.randn(4, 3), torch.zeros(4, dtype=torch.long))


@pytest.mark.parametrize("masks", ["own", "shared"])
def test_many_chunks_on_a_skip_network_do_not_crash(masks):
    """Before, 24 or more chunks of a U-Net's prediction took a TorchScript trace that crashed."""
    torch.manual_seed(0)
    bnn = MCDropout(UNet().eval(), "segmentation", masks=masks)
    x = torch.randn(2, 1, 8, 8)
    probs = (
        predict(bnn.model, bnn.guide, x, num_samples=300, chunk_size=10)
        if bnn.guide.prototype_trace
        else None
    )
    if probs is None:
        bnn.predict(x[:2], num_samples=2)
        probs = predict(bnn.model, bnn.guide, x, num_samples=300, chunk_size=10)
    assert probs.probs["obs"].shape == (300, 2, 8, 8, 3) and torch.isfinite(probs.probs["obs"]).all()


@pytest.mark.parametrize(
    "loss", [BBAlpha(0.5, num_particles=4), DropoutELBO(num_particles=4)], ids=["bbalpha", "elbo"]
)
@pytest.mark.parametrize("make", [ResNet, UNet], ids=["residual", "skip-concatenation"])
def test_vectorised_particles_run_on_residual_and_skip_networks(make, loss):
    torch.manual_seed(0)
    net = make().eval()
    segmentation = make is UNet
    x = torch.randn(4, 1, 8, 8) if segmentation else torch.randn(4, 3, 8, 8)
    y = torch.randint(0, 3, (4, 8, 8)) if segmentation else torch.randint(0, 5, (4,))
    model = from_module(net, "segmentation" if segmentation else "categorical")
    guide = DropoutGuide(model)
    svi = SVI(model, guide, pyro.optim.Adam({"lr": 1e-3}), loss)
    for _ in range(2):
        assert torch.isfinite(torch.tensor(svi.step(x, y)))
    assert loss.vectorize_particles  # vectorised, not fallen back to a loop


def test_the_guide_keeps_the_networks_rates_and_takes_rates_for_the_weights_no_dropout_feeds():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Dropout(0.3), nn.Linear(8, 2))
    x, y = torch.randn(4, 3), torch.zeros(4, dtype=torch.long)
    guide = DropoutGuide(from_module(net, "categorical"))
    guide(x, y)
    assert {k: round(float(v), 6) for k, v in guide.dropout_rates().items()} == {
        "net.0.weight": 0.0,
        "net.3.weight": 0.3,
    }
    pyro.clear_param_store()
    with pytest.raises(ValueError, match=r"site 'net.3.weight'.*own dropout draws its masks \(p = 0.3\)"):
        DropoutGuide(from_module(net, "categorical"), dropout=0.1)(x, y)
    pyro.clear_param_store()
    with pytest.raises(ValueError, match="concrete=True cannot learn it"):
        DropoutGuide(from_module(net, "categorical"), concrete=True)(x, y)
    pyro.clear_param_store()
    guide = DropoutGuide(from_module(net, "categorical"), dropout={"net.0.weight": 0.2})
    guide(x, y)
    assert float(guide.dropout_rates()["net.0.weight"]) == pytest.approx(0.2)


def test_the_kl_of_a_network_masked_weight_is_the_bernoulli_familys():
    from torch.distributions import kl_divergence

    from pyro_dropout import BernoulliDropout, QuantisedGaussian
    from pyro_dropout.distributions import NetworkDropout

    loc, prior = torch.randn(4, 6), QuantisedGaussian(0.0, 0.5).expand([4, 6]).to_event(2)
    own, family = NetworkDropout(loc, 0.3), BernoulliDropout(loc, 0.3)
    assert torch.allclose(kl_divergence(own, prior), kl_divergence(family, prior))
    assert torch.equal(own.rsample(torch.Size([2])), loc.expand(2, 4, 6))  # its masks are the network's
