"""The dropout KL in closed form (one expression over the means) equals the per-site analytic KL
(1e-5 relative): Bernoulli, network-masked and point-mass sites, quantised and plain Gaussian
priors, a prior mean other than 0, particles; the sites it does not cover are left to kl_divergence."""

from __future__ import annotations

import pyro.distributions
import pytest
import torch
from torch.distributions import kl_divergence

from pyro_dropout import BernoulliDropout, ConcreteDropout, QuantisedGaussian
from pyro_dropout.distributions import NetworkDropout
from pyro_dropout.infer.penalty import closed_form_kl

_SITE = {"mask": None, "scale": 1.0}


def _pairs():
    torch.manual_seed(0)
    w, b = torch.randn(7, 5), torch.randn(7)
    prior = QuantisedGaussian(0.0, 0.5, 0.01).expand([7, 5]).to_event(2)
    return [
        (BernoulliDropout(w, 0.1), prior, _SITE),
        (NetworkDropout(w * 2, 0.3), pyro.distributions.Normal(0.0, 2.0).expand([7, 5]).to_event(2), _SITE),
        (BernoulliDropout(b, 0.0, event_dim=1), QuantisedGaussian(0.0, 1.5).expand([7]).to_event(1), _SITE),
        (BernoulliDropout(w.expand(4, 1, 7, 5), 0.1), prior.expand([4, 1]), _SITE),  # 4 particles
        (
            BernoulliDropout(b * 3, 0.2, event_dim=1),
            QuantisedGaussian(0.3, 0.7).expand([7]).to_event(1),
            _SITE,
        ),
    ]


def test_the_closed_form_equals_the_sum_of_the_per_site_kls():
    pairs = _pairs()
    closed, left = closed_form_kl(pairs)
    assert left == []
    expected = sum(kl_divergence(q, p).sum() for q, p, _ in pairs)
    assert torch.allclose(closed, expected, rtol=1e-5), (closed, expected)


@pytest.mark.parametrize(
    "pair",
    [
        (
            ConcreteDropout(torch.randn(3, 4), torch.tensor(0.2)),
            QuantisedGaussian(0.0, 1.0).expand([3, 4]).to_event(2),
        ),
        (BernoulliDropout(torch.randn(3, 4), 0.1), QuantisedGaussian(torch.randn(3, 4), 1.0).to_event(2)),
        (
            BernoulliDropout(torch.randn(2, 3, 4), 0.1),
            QuantisedGaussian(0.0, 1.0).expand([2, 3, 4]).to_event(2),
        ),
    ],
    ids=["learned-rate", "a-prior-mean-per-weight", "means-per-run"],
)
def test_what_the_closed_form_does_not_cover_is_left_to_kl_divergence(pair):
    closed, left = closed_form_kl([(*pair, _SITE)])
    assert closed is None and left == [0]
