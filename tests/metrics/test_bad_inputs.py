"""Scores of no points are an error, not NaN."""

import pytest
import torch

from pyro_dropout.metrics import accuracy, crps, expected_calibration_error, gaussian_log_likelihood, rmse


@pytest.mark.parametrize(
    ("score", "args"),
    [
        (accuracy, (torch.zeros(3, 0, 2), torch.zeros(0, dtype=torch.long))),
        (expected_calibration_error, (torch.zeros(0, 2), torch.zeros(0, dtype=torch.long))),
        (rmse, (torch.zeros(0), torch.zeros(0))),
        (crps, (torch.zeros(4, 0), torch.zeros(0), 1.0)),
        (gaussian_log_likelihood, (torch.zeros(4, 0), torch.zeros(0), 1.0)),
    ],
    ids=lambda v: getattr(v, "__name__", ""),
)
def test_no_points_is_an_error(score, args):
    with pytest.raises(ValueError, match="no points"):
        score(*args)


def test_labels_are_moved_to_the_predictions_device():
    """``check_labels(..., device=)`` checks the labels where they are and hands them over on the
    predictions' device (the meta device stands in for a GPU: no data, only the placement)."""
    from pyro_dropout.metrics._checks import check_labels

    y = check_labels(torch.tensor([0, 2, 1]), 3, 3, device=torch.device("meta"))
    assert y.device.type == "meta" and y.dtype == torch.long
    with pytest.raises(ValueError, match=r"labels must lie in \[0, 3\)"):
        check_labels(torch.tensor([0, 3, 1]), 3, 3, device=torch.device("meta"))


def _draws(t: int, n: int = 5, c: int = 3, seed: int = 0) -> torch.Tensor:
    return torch.softmax(torch.randn(t, n, c, generator=torch.Generator().manual_seed(seed)), -1)


@pytest.mark.parametrize("name", ["bald", "variation_ratios", "mean_std"])
@pytest.mark.parametrize("t", [0, 1])
def test_scores_of_the_draws_disagreement_need_two_draws(name, t):
    """With one draw every such score is 0 (the picks arbitrary), with none NaN: both refused."""
    from pyro_dropout.metrics import acquisition_scores

    with pytest.raises(ValueError, match=rf"{t} draws .*needs two or more"):
        acquisition_scores(name, _draws(t))


def test_batch_bald_needs_two_draws_and_a_positive_piece():
    from pyro_dropout.metrics import batch_bald

    with pytest.raises(ValueError, match="needs two or more"):
        batch_bald(_draws(1), 2)
    for piece in (0, -1):  # -1 left the gains uninitialised (picks with negative scores)
        with pytest.raises(ValueError, match=r"piece .* must be a positive int"):
            batch_bald(_draws(4), 2, piece=piece)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_batch_bald_on_one_hot_draws_with_one_configuration_is_finite(dtype):
    """Sampled configurations of one-hot draws: log of a zero joint made NaN scores in float32
    (1e-300 is 0 there)."""
    from pyro_dropout.metrics import batch_bald

    labels = torch.randint(0, 3, (6, 8), generator=torch.Generator().manual_seed(1))
    one_hot = torch.nn.functional.one_hot(labels, 3).to(dtype)
    _, scores = batch_bald(one_hot, 3, num_configurations=1, generator=torch.Generator().manual_seed(0))
    assert bool(torch.isfinite(scores).all())


def test_joint_entropy_refuses_a_table_too_large_to_enumerate():
    from pyro_dropout.metrics import joint_entropy

    with pytest.raises(ValueError, match=r"2\^40 configurations .*num_configurations"):
        joint_entropy(_draws(4, n=40, c=2))


def test_epistemic_variance_of_no_points_is_refused():
    from pyro_dropout.metrics import epistemic_variance

    with pytest.raises(ValueError, match="N >= 1"):
        epistemic_variance(torch.zeros(5, 0))


def test_in_between_refuses_what_has_no_answer():
    """A zero sd on the data (a ratio of inf before), queries of other columns (cdist's error before),
    repeated training rows (an error about near, never given, before), a huge num."""
    from pyro_dropout.metrics import gap_points, in_between

    x = torch.cat([torch.linspace(-2, -1, 20), torch.linspace(1, 2, 20)]).unsqueeze(-1)
    queries = torch.linspace(-2, 2, 81).unsqueeze(-1)
    with pytest.raises(ValueError, match="the epistemic sd is 0"):
        in_between(x, queries, torch.zeros(81))
    with pytest.raises(ValueError, match="queries x have 2 columns, the training inputs 1"):
        in_between(x, torch.zeros(81, 2), torch.ones(81))
    with pytest.raises(ValueError, match=r"rows repeated.*give near="):
        in_between(x.repeat(3, 1), queries, torch.ones(81))
    with pytest.raises(ValueError, match="num must be an int in"):
        gap_points(x, num=10**9)
    with pytest.raises(ValueError, match=r"seed must be an int in \[0, 2\*\*63\)"):
        gap_points(x, seed=2**64)
