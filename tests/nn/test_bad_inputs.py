"""Layers say what is wrong with their sizes and their inputs' dtypes."""

import pytest
import torch

from pyro_dropout import DropoutGuide
from pyro_dropout.nn import MLP, Conv2d


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"kernel_size": 0}, "kernel_size"),
        ({"kernel_size": (3, 0)}, "kernel_size"),
        ({"kernel_size": 3, "stride": 0}, "stride"),
        ({"kernel_size": 3, "dilation": -1}, "dilation"),
        ({"kernel_size": 2.5}, "kernel_size"),
    ],
)
def test_conv_sizes_must_be_positive_whole_numbers(kwargs, name):
    with pytest.raises(ValueError, match=rf"Conv2d: {name} must be a positive whole number"):
        Conv2d(1, 2, **kwargs)


@pytest.mark.parametrize(
    ("x", "dtype"),
    [(torch.randint(0, 5, (6, 3)), "torch.int64"), (torch.randn(6, 3, dtype=torch.float64), "torch.float64")],
    ids=["integer data", "float64 data, float32 model"],
)
def test_data_of_another_dtype_than_the_model_is_named(x, dtype):
    model = MLP(3, hidden=(4,))
    guide = DropoutGuide(model)
    guide(torch.randn(6, 3), torch.randn(6))
    with pytest.raises(
        TypeError, match=rf"linear: the input has dtype {dtype} but the layer's weights are torch.float32"
    ):
        model(x)
