"""The package's small shared helpers (``pyro_dropout/ops.py``)."""

import numpy as np
import pytest
import torch

from pyro_dropout.metrics import expected_calibration_error
from pyro_dropout.ops import is_positive_int, is_positive_number


@pytest.mark.parametrize("value", [1, 7, 10**12])
def test_a_positive_int_is_one(value):
    assert is_positive_int(value)


@pytest.mark.parametrize("value", [0, -3, True, False, 2.0, "3", None, np.int64(3)])
def test_zero_negatives_bools_floats_strings_none_and_numpy_ints_are_not(value):
    assert not is_positive_int(value)


@pytest.mark.parametrize("value", [1, 0.5, 1e-12, np.float64(2.0)])
def test_a_positive_finite_number_is_one(value):
    assert is_positive_number(value)


@pytest.mark.parametrize("value", [0, -0.5, True, float("nan"), float("inf"), "1", None, torch.tensor(1.0)])
def test_zero_negatives_bools_nan_inf_strings_none_and_tensors_are_not(value):
    assert not is_positive_number(value)


def test_a_bool_is_refused_where_a_count_is_asked_for():
    """``n_bins=True`` passed as one bin before the checks shared this helper."""
    probs, labels = torch.tensor([[[0.3, 0.7]]]), torch.tensor([1])
    assert expected_calibration_error(probs, labels, n_bins=1) == pytest.approx(0.3)
    with pytest.raises(ValueError, match="reliability_diagram: n_bins must be a positive int, got True"):
        expected_calibration_error(probs, labels, n_bins=True)
