from __future__ import annotations

import pyro
import pytest
import torch


@pytest.fixture(autouse=True)
def _fresh_pyro_state():
    """Each test starts with an empty param store, validation on and a fixed seed."""
    pyro.clear_param_store()
    pyro.enable_validation(True)
    pyro.set_rng_seed(0)
    dtype = torch.get_default_dtype()
    yield
    torch.set_default_dtype(dtype)
    pyro.clear_param_store()
