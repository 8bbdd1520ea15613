"""Policies from a model + guide: Thompson sampling draws one function per decision (or per
episode), ε-greedy follows the expected weights; bad arguments are named."""

import pyro
import pytest
import torch

from pyro_dropout.guides import DropoutGuide
from pyro_dropout.policies import EpsilonGreedy, ThompsonSampling
from pyro_dropout_experiments.bandit import RewardModel


def _learner(dropout=0.5):
    pyro.clear_param_store()
    pyro.set_rng_seed(0)
    model = RewardModel(2, 4, (16,), dropout=dropout)
    guide = DropoutGuide(model)
    x, a, r = torch.randn(8, 2), torch.randint(4, (8,)), torch.randn(8)
    guide(x, a, r)
    return model, guide, torch.randn(6, 2)


def test_thompson_sampling_takes_the_best_action_of_one_drawn_function():
    model, guide, x = _learner()
    policy = ThompsonSampling(model, guide)
    pyro.set_rng_seed(1)
    scores = policy.scores(x)
    pyro.set_rng_seed(1)
    latents = pyro.poutine.trace(guide).get_trace(x)
    expected = pyro.poutine.replay(model.action_values, trace=latents)(x)
    assert torch.equal(scores, expected)
    pyro.set_rng_seed(1)
    assert torch.equal(policy.act(x), expected.argmax(-1))


def test_per_decision_draws_differ_and_per_episode_draws_stay_until_resampled():
    model, guide, x = _learner()
    every = ThompsonSampling(model, guide)
    assert not torch.equal(every.scores(x), every.scores(x))  # p = 0.5: a new mask each time
    episode = ThompsonSampling(model, guide, per="episode")
    first = episode.scores(x)
    assert torch.equal(first, episode.scores(x))
    episode.resample()
    assert not torch.equal(first, episode.scores(x))


def test_epsilon_greedy_follows_the_expected_weights_and_explores_at_its_rate():
    model, guide, x = _learner()
    greedy = EpsilonGreedy(model, guide, epsilon=0.0)
    expected = pyro.poutine.condition(model.action_values, data=guide.median())(x)
    assert torch.equal(greedy.act(x), expected.argmax(-1))
    explorer = EpsilonGreedy(model, guide, epsilon=1.0, seed=3)
    many = torch.randn(4000, 2)
    counts = torch.bincount(explorer.act(many), minlength=4).double() / 4000
    assert torch.allclose(
        counts, torch.full((4,), 0.25, dtype=torch.float64), atol=0.03
    )  # uniform: 4 sd of a share is 0.027


def test_bad_arguments_are_named():
    model, guide, _ = _learner()
    with pytest.raises(ValueError, match="per must be 'decision' or 'episode'"):
        ThompsonSampling(model, guide, per="step")
    with pytest.raises(ValueError, match="epsilon must be in"):
        EpsilonGreedy(model, guide, epsilon=1.5)
    with pytest.raises(TypeError, match="give values="):
        ThompsonSampling(torch.nn.Linear(2, 2), guide)
    with pytest.raises(ValueError, match="NaN or infinite"):
        ThompsonSampling(model, guide).act(torch.full((2, 2), float("nan")))
    with pytest.raises(ValueError, match="floating-point tensor"):
        EpsilonGreedy(model, guide).act(torch.ones(3, dtype=torch.long))
