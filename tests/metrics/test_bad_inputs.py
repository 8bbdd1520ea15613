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
