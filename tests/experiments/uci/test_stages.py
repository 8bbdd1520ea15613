"""The protocol's selection: the best finite validation score, never a NaN."""

import math

import pytest

from pyro_dropout_experiments.uci import select_best


def test_a_nan_validation_score_is_never_chosen():
    rows = [{"p": 0.1, "test_ll": float("nan")}, {"p": 0.2, "test_ll": -3.0}, {"p": 0.3, "test_ll": -2.0}]
    assert select_best(rows)["p"] == 0.3
    # max() alone would keep the NaN: it compares False both ways
    assert math.isnan(max(rows, key=lambda r: r["test_ll"])["test_ll"])
    assert select_best([{"p": 1, "test_ll": -math.inf}, {"p": 2, "test_ll": -5.0}])["p"] == 2


def test_ties_keep_the_first_and_no_finite_score_is_an_error():
    assert select_best([{"p": 1, "test_ll": -1.0}, {"p": 2, "test_ll": -1.0}])["p"] == 1
    with pytest.raises(ValueError, match="split 3: no candidate has a finite validation test_ll"):
        select_best([{"test_ll": float("nan")}, {"test_ll": None}], where="split 3")
