from __future__ import annotations

import ctypes
import gc
import os
import sys

import pyro
import pytest
import torch


def pytest_configure(config):
    """Under pytest-xdist (``make test`` runs one worker per core) each worker computes on one
    thread: the tests' networks are small, and two workers of two threads each on two cores spend
    their time waiting on each other."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        torch.set_num_threads(1)


def pytest_collection_modifyitems(config, items):
    """Tests marked ``cuda`` (a whole file, or one parameter such as ``device="cuda"``) are
    skipped where no CUDA device is available."""
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if item.get_closest_marker("cuda") is not None:
            item.add_marker(skip)


@pytest.fixture(params=["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def device(request):
    """A test that takes ``device`` runs on the CPU, and again on a CUDA device where there is one."""
    return request.param


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
    _release_memory()


def _release_memory() -> None:
    """Close the figures a test left open and hand freed heap back to the system: a worker runs
    hundreds of tests, and without this its resident memory only grows."""
    if "matplotlib.pyplot" in sys.modules:
        sys.modules["matplotlib.pyplot"].close("all")
    gc.collect(1)  # the young generations: what a test leaves (a full collection costs ~0.14 s)
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except (OSError, AttributeError):  # not glibc
            pass


@pytest.fixture
def tiny(tmp_path):
    """60 rows: 3 informative features, 1 constant column, target last; 3 splits of 50/10 rows."""
    from tests.uci_data import write_tiny_uci

    return write_tiny_uci(tmp_path)
