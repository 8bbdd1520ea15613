import math

import pytest
import torch
from torch.distributions import RelaxedBernoulli

from pyro_dropout.distributions import BernoulliDropout, ConcreteDropout, bernoulli_keep, mask_dim_for
from pyro_dropout.distributions.bernoulli_dropout import keep_threshold


def test_bernoulli_masks_whole_input_columns_with_inverted_scaling():
    torch.manual_seed(0)
    m = torch.randn(5, 8)
    w = BernoulliDropout(m, 0.3).rsample(torch.Size([1000]))
    assert w.shape == (1000, 5, 8)
    kept = (w != 0).all(dim=-2)  # [1000, 8]: a column is kept as a whole ...
    dropped = (w == 0).all(dim=-2)
    assert bool((kept | dropped).all())
    # ... and scaled by 1 / (1 - p), so that E[W] = M
    assert torch.allclose(w[0][:, kept[0]], m[:, kept[0]] / 0.7)
    # drop rate: 8000 Bernoulli(0.3) draws, se = sqrt(.21/8000) = 0.005; 5 se
    assert abs(dropped.float().mean().item() - 0.3) < 0.025


def test_mean_and_variance_match_monte_carlo():
    torch.manual_seed(1)
    m = torch.randn(3, 4, dtype=torch.float64)
    q = BernoulliDropout(m, 0.2)
    w = q.rsample(torch.Size([200000]))
    # relative MC error of mean/var with 2e5 draws is ~1e-2 at worst for these sizes
    assert torch.allclose(w.mean(0), q.mean, atol=0.02)
    assert torch.allclose(w.var(0), q.variance, rtol=0.05, atol=1e-3)


def test_rsample_is_reparameterised_in_loc():
    m = torch.randn(3, 4, requires_grad=True)
    BernoulliDropout(m, 0.5).rsample().sum().backward()
    assert m.grad is not None and (m.grad != 0).any()


def test_concrete_is_differentiable_in_p_and_tends_to_bernoulli():
    torch.manual_seed(0)
    p = torch.tensor(0.3, requires_grad=True)
    m = torch.ones(2, 1000)
    w = ConcreteDropout(m, p, temperature=0.1).rsample()
    w.sum().backward()
    assert p.grad is not None and torch.isfinite(p.grad)
    # at t = 0.1 most relaxed masks are within 0.1 of 0 or 1 (mass concentrates on the ends)
    keep = (w[0] * 0.7).detach()
    assert ((keep < 0.1) | (keep > 0.9)).float().mean() > 0.8
    assert abs((keep < 0.5).float().mean().item() - 0.3) < 0.05


def test_concrete_keep_mask_is_the_relaxed_bernoulli_draw_of_its_uniforms():
    # keep = 1 - sigmoid((logit p + logit u) / t) (paper 001, eq. 5) for the same uniforms u, to
    # rounding; and the drop indicator 1 - keep follows RelaxedBernoulli(t, p): its empirical CDF
    # within 0.0138 of the law's at five points (20,000 draws; DKW: exceeded with probability
    # under 0.1%)
    p, t, shape = torch.tensor([0.05, 0.3, 0.8]).reshape(3, 1), 0.1, torch.Size([3, 20_000])
    q = ConcreteDropout(torch.ones(3, 4), 0.5, temperature=t)
    torch.manual_seed(3)
    keep = q.sample_keep_with(shape, p)
    torch.manual_seed(3)
    u = torch.rand(shape).clamp(1e-7, 1 - 1e-7)
    expected = 1 - torch.sigmoid((torch.log(p) - torch.log1p(-p) + torch.log(u) - torch.log1p(-u)) / t)
    assert torch.allclose(keep, expected, atol=1e-5)
    grid = torch.tensor([0.01, 0.1, 0.5, 0.9, 0.99])  # away from 0 and 1, where float32 saturates
    for row, rate in zip(1 - keep, p.flatten(), strict=True):
        # P(Z <= z) = sigmoid(t logit(z) - logit(p)) for Z ~ RelaxedBernoulli(t, p)
        cdf = torch.sigmoid(t * torch.logit(grid) - RelaxedBernoulli(torch.tensor(t), probs=rate).logits)
        empirical = (row.unsqueeze(-1) <= grid).float().mean(0)
        assert (empirical - cdf).abs().max() < 0.0138, (rate.item(), empirical, cdf)


def test_concrete_log_prob_matches_relaxed_bernoulli():
    p, t = torch.tensor(0.3), 0.1
    q = ConcreteDropout(torch.ones(1, 3), p, temperature=t)
    z = torch.tensor([0.01, 0.3, 0.9])
    expected = RelaxedBernoulli(torch.tensor(t), probs=p).log_prob(z)
    assert torch.allclose(q.log_prob_keep(1 - z), expected, atol=1e-5)
    # log_prob of a value sums the units' densities
    value = torch.ones(1, 3) * (1 - z) / (1 - p)
    assert torch.allclose(q.log_prob(value), expected.sum(), atol=1e-4)


def test_bernoulli_log_prob_is_the_mass_of_the_mask():
    m = torch.tensor([[1.0, 2.0, 0.0], [3.0, 0.0, 0.0]])  # the third column is all zero
    q = BernoulliDropout(m, 0.25)
    value = torch.stack([m[:, 0] / 0.75, torch.zeros(2), torch.zeros(2)], dim=-1)
    # column 0 kept, column 1 dropped, column 2 uninformative (mass p + 1 - p = 1)
    assert torch.allclose(q.log_prob(value), torch.tensor(math.log(0.75) + math.log(0.25)))


def test_point_mass_has_no_randomness():
    m = torch.randn(4)
    q = BernoulliDropout(m, 0.0, event_dim=1)
    assert q.is_point_mass and torch.equal(q.rsample(torch.Size([3])), m.expand(3, 4))
    assert torch.equal(q.log_prob(m), torch.tensor(0.0))


def test_expand_keeps_family_and_shares_parameters():
    p = torch.tensor(0.2, requires_grad=True)
    q = ConcreteDropout(torch.randn(3, 4), p, temperature=0.5).expand([6, 1])
    assert type(q) is ConcreteDropout and q.batch_shape == (6, 1) and q.event_shape == (3, 4)
    assert q.temperature == 0.5 and q.rsample().shape == (6, 1, 3, 4)
    # one mask per particle: each draw differs
    s = q.rsample()
    assert not torch.allclose(s[0], s[1])


def test_conv_weights_mask_input_channels():
    torch.manual_seed(0)
    assert mask_dim_for(4) == -3 and mask_dim_for(2) == -1 and mask_dim_for(1) == -1
    w = BernoulliDropout(torch.ones(6, 5, 3, 3), 0.5, event_dim=4).rsample()
    per_channel = (w != 0).flatten(-2).all(-1).all(0) | (w == 0).flatten(-2).all(-1).all(0)
    assert bool(per_channel.all())


@pytest.mark.parametrize("p", [-0.1, 1.0, 1.5, float("nan")])
def test_rate_outside_unit_interval_is_rejected(p):
    with pytest.raises(ValueError, match="dropout probability"):
        BernoulliDropout(torch.zeros(2, 2), p)


@pytest.mark.parametrize("t", [0.0, -1.0, float("inf")])
def test_bad_temperature(t):
    with pytest.raises(ValueError, match="temperature"):
        ConcreteDropout(torch.zeros(2, 2), 0.1, temperature=t)


def test_event_dim_must_fit():
    with pytest.raises(ValueError, match="event_dim"):
        BernoulliDropout(torch.zeros(3), 0.1, event_dim=2)


@pytest.mark.parametrize("keep", [0.995, 0.5, 0.05])
def test_bernoulli_keep_frequency_matches_its_probability(keep):
    torch.manual_seed(4)
    n = 2_000_000
    draws = bernoulli_keep(torch.Size([n]), keep, torch.device("cpu"))
    assert draws.dtype == torch.bool and draws.shape == (n,)
    se = math.sqrt(keep * (1 - keep) / n)
    assert abs(draws.double().mean().item() - keep) < 5 * se  # 5 standard errors
    # the two 32-bit halves of each random word are independent draws: neighbours do not co-vary
    pairs = draws[: n - n % 2].view(-1, 2).double()
    both = (pairs[:, 0] * pairs[:, 1]).mean().item()
    assert abs(both - keep**2) < 5 * math.sqrt(keep**2 * (1 - keep**2) / (n // 2))


def test_bernoulli_keep_per_row_probabilities_odd_sizes_and_certain_keep():
    torch.manual_seed(5)
    keep = torch.tensor([[1.0], [0.9], [0.1]], dtype=torch.float64)
    draws = bernoulli_keep(torch.Size([3, 300_001]), keep, torch.device("cpu"))  # odd count
    assert bool(draws[0].all())  # keep probability 1: every unit kept, not 1 - 2^-32
    freq = draws[1:].double().mean(1)
    se = (keep[1:, 0] * (1 - keep[1:, 0]) / 300_001).sqrt()
    assert bool(((freq - keep[1:, 0]).abs() < 5 * se).all())


def test_bernoulli_masks_are_seeded_and_recorded_by_make_fx():
    from torch.fx.experimental.proxy_tensor import make_fx

    torch.manual_seed(6)
    q = BernoulliDropout(torch.ones(4, 6), torch.tensor([0.2, 0.6]).reshape(2, 1, 1)[..., 0, 0])

    def draw(loc):  # unchecked, as in the losses: the check of the rate reads its values
        return BernoulliDropout(loc, q.p, validate_args=False).rsample(torch.Size([3]))

    graph = make_fx(draw, tracing_mode="real")(q.loc)  # as the losses record a graph
    # the draw is one operation of the graph, called afresh at every run
    assert sum("bernoulli_keep" in str(n.target) for n in graph.graph.nodes) == 1
    torch.manual_seed(7)
    a = graph(q.loc)
    torch.manual_seed(7)
    b = graph(q.loc)
    torch.manual_seed(7)
    eager = draw(q.loc)
    assert a.shape == (3, 2, 4, 6) and torch.equal(a, b) and torch.equal(a, eager)
    assert not torch.equal(graph(q.loc), a)  # fresh masks, not the recorded ones
    # each run keeps with its own rate and scales the kept columns by 1 / (1 - p)
    assert torch.allclose(a[:, 0][a[:, 0] != 0], torch.tensor(1 / 0.8))
    assert torch.allclose(a[:, 1][a[:, 1] != 0], torch.tensor(1 / 0.4))


@pytest.mark.parametrize(
    "keep", [1.0, 0.5, 0.95, 1 / 3, 2**-33, 1e-12, 1 - 2**-33, 5 * 2**-33, 0.75 + 2**-33]
)
def test_a_float_keep_probability_draws_what_the_same_tensor_draws(keep):
    # a Python float's threshold is computed in Python (a constant in a trace), a tensor's by ops:
    # the same rounding (doubles, ties to even: 5 * 2^-33 and 0.75 + 2^-33 are ties) and clamping
    cpu = torch.device("cpu")
    assert keep_threshold(keep, cpu) == keep_threshold(torch.tensor(keep, dtype=torch.float64), cpu)
    for shape in (torch.Size([999]), torch.Size([3, 70_001])):
        torch.manual_seed(0)
        from_float = bernoulli_keep(shape, keep, torch.device("cpu"))
        torch.manual_seed(0)
        from_tensor = bernoulli_keep(shape, torch.tensor(keep, dtype=torch.float64), torch.device("cpu"))
        assert torch.equal(from_float, from_tensor)
