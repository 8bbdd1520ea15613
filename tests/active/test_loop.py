"""The active-learning loop: each round trains, records the test error and acquires k new rows."""

import pyro
import pytest
import torch
from pyro.infer import SVI

from pyro_dropout import DropoutELBO, DropoutGuide
from pyro_dropout.active import ActiveLearner, balanced_start
from pyro_dropout.nn import MLP


def _blobs(n, seed):
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(n) % 3
    centres = torch.tensor([[0.0, 2.0], [-2.0, -1.0], [2.0, -1.0]])
    return centres[y] + 0.8 * torch.randn(n, 2, generator=g), y


def _fit(calls):
    def fit(x, y, last=None):
        calls.append((len(x), last is not None))
        pyro.clear_param_store()
        model = MLP(2, 3, hidden=(16,), likelihood="categorical")
        guide = DropoutGuide(model, dropout=0.2)
        svi = SVI(model, guide, pyro.optim.Adam({"lr": 0.02}), DropoutELBO())
        for _ in range(60):
            svi.step(x, y)
        return model, guide

    return fit


@pytest.mark.parametrize("acquisition", ["bald", "batch_bald", "random", "mean_std"])
def test_each_round_adds_k_new_rows_and_records_the_error(acquisition):
    x_pool, y_pool = _blobs(90, 0)
    x_test, y_test = _blobs(60, 1)
    calls = []
    learner = ActiveLearner(_fit(calls), x_pool, y_pool, x_test, y_test, acquisition, k=4, num_samples=8)
    assert len(learner.labelled) == 6  # two of each class
    history = learner.run(3)
    assert [h["labelled"] for h in history] == [6, 10, 14]
    assert all(0 <= h["error"] <= 1 for h in history)
    assert len(learner.labelled) == 18 and len(set(learner.labelled.tolist())) == 18  # none twice
    assert calls == [(6, False), (10, False), (14, False)]  # from scratch each round


def test_warm_start_passes_the_last_fit_and_a_subset_is_scored():
    x_pool, y_pool = _blobs(60, 2)
    calls = []
    learner = ActiveLearner(_fit(calls), x_pool, y_pool, *_blobs(30, 3), k=2, warm=True, subset=10)
    learner.run(2)
    assert calls == [(6, False), (8, True)]


def test_the_start_is_balanced_and_bad_settings_are_named():
    y = torch.tensor([0, 1, 2, 0, 1, 2, 0, 1, 2, 2])
    start = balanced_start(y, 2, seed=0)
    assert sorted(y[start].tolist()) == [0, 0, 1, 1, 2, 2]
    with pytest.raises(ValueError, match="class 0 has 3 rows, fewer than 4"):
        balanced_start(y, 4)
    x, y = _blobs(30, 0)
    with pytest.raises(ValueError, match="k must be a positive int"):
        ActiveLearner(_fit([]), x, y, x, y, k=0)
    with pytest.raises(ValueError, match="unknown function 'bold'"):
        ActiveLearner(_fit([]), x, y, x, y, acquisition="bold")


@pytest.mark.parametrize(
    ("settings", "match"),
    [
        ({"subset": -5}, "subset must be a positive int"),
        ({"initial": [0.5, 1.7, 2.2]}, "row indices must be integers"),
        ({"initial": [0, 0, 1, 2]}, "appears more than once"),
        ({"initial": [-1, 0, 1]}, r"must lie in \[0, 30\) \(no negative index\)"),
        ({"batch_size": 0}, "batch_size must be a positive int"),
        ({"num_samples": 1}, "num_samples must be an int >= 2"),
        ({"seed": 2**64}, r"seed must be an int in \[0, 2\*\*63\)"),
    ],
    ids=[
        "subset",
        "fractional-initial",
        "repeated-initial",
        "negative-initial",
        "batch-size",
        "draws",
        "seed",
    ],
)
def test_every_setting_is_checked_where_it_enters(settings, match):
    """Each of these was taken before: a negative subset dropped the last candidates, fractional
    indices were truncated, a repeated or negative one labelled a row twice or the last row."""
    x, y = _blobs(30, 0)
    with pytest.raises(ValueError, match=match):
        ActiveLearner(_fit([]), x, y, x, y, **settings)


def test_a_start_and_a_run_that_make_no_sense_are_refused():
    x, y = _blobs(30, 0)
    for per_class in (0, -1):
        with pytest.raises(ValueError, match="per_class must be a positive int"):
            balanced_start(y, per_class)
    with pytest.raises(ValueError, match=r"one-hot rows\? pass y.argmax"):
        balanced_start(torch.nn.functional.one_hot(y, 3), 2)
    learner = ActiveLearner(_fit([]), x, y, x, y, k=2)
    with pytest.raises(ValueError, match="rounds must be a whole number >= 0"):
        learner.run(-1)
    full = ActiveLearner(_fit([]), x, y, x, y, initial=list(range(30)))
    with pytest.raises(ValueError, match=r"every row of the pool \(30\) is labelled"):
        full.run(1)
