"""Training checkpoints hold tensors and plain data and are read without unpickling code."""

import pickle

import numpy as np
import pytest
import torch

from pyro_dropout_experiments.core import TrainingCheckpoint, read_checkpoint
from pyro_dropout_experiments.uci import status


class _RunsCode:
    """A pickle that, when loaded by an unpickler that allows it, writes a file."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (exec, (f"open({self.marker!r}, 'w').write('ran')",))


@pytest.mark.parametrize("how", ["torch.save", "pickle"])
def test_a_crafted_checkpoint_runs_no_code(tmp_path, how):
    marker = tmp_path / "marker"
    path = tmp_path / "tiny_mc-dropout_0123456789abcdef.train.pt"
    payload = {"history": [1.0], "epochs": 2, "seconds": 1.0, "desc": "x", "key": _RunsCode(marker)}
    if how == "torch.save":
        torch.save(payload, path)
    else:
        path.write_bytes(pickle.dumps(payload))
    with pytest.raises(
        ValueError, match=r"\.train\.pt is not a training checkpoint this version can read safely"
    ):
        status(tmp_path)  # today's `pyro-dropout uci-status DIR` reads every checkpoint in DIR
    with pytest.raises(ValueError, match="remove it to train from the start"):
        TrainingCheckpoint(path, svi=None, key="k").load()
    assert not marker.exists()


@pytest.mark.parametrize("content", [b"", b"\x00\x01 truncated", b"PK\x03\x04 not a zip"])
def test_an_empty_or_truncated_checkpoint_is_named(tmp_path, content):
    path = tmp_path / "x.train.pt"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=r"x\.train\.pt is not a training checkpoint"):
        read_checkpoint(path)


def test_a_checkpoint_of_another_format_or_key_is_refused(tmp_path):
    path = tmp_path / "x.train.pt"
    torch.save({"history": [], "key": "k"}, path)  # no format: written by an older version
    with pytest.raises(ValueError, match="not a training checkpoint of format 2"):
        read_checkpoint(path)
    TrainingCheckpoint(path, svi=None, key="other").save({"history": []})
    with pytest.raises(ValueError, match="holds the training of other runs or settings"):
        TrainingCheckpoint(path, svi=None, key="k").load()


def test_random_states_survive_the_round_trip(tmp_path):
    """NumPy's random state (an array inside a tuple) is stored as tensors and rebuilt exactly."""
    legacy = np.random.RandomState(3)  # the global NumPy random state has this layout
    state = {"numpy": legacy.get_state(), "torch": torch.get_rng_state(), "nested": [(1, 2.5, None, "s")]}
    path = tmp_path / "x.train.pt"
    TrainingCheckpoint(path, svi=None, key="k").save({"rng": state, "history": [0.5]})
    loaded = TrainingCheckpoint(path, svi=None, key="k").load()
    assert loaded is not None
    name, keys, pos, has_gauss, cached = loaded["rng"]["numpy"]
    expected = state["numpy"]
    assert name == expected[0] and np.array_equal(keys, expected[1]) and keys.dtype == expected[1].dtype
    assert (pos, has_gauss, cached) == expected[2:]
    assert torch.equal(loaded["rng"]["torch"], state["torch"])
    assert loaded["rng"]["nested"] == [(1, 2.5, None, "s")] and loaded["history"] == [0.5]
    legacy.set_state(loaded["rng"]["numpy"])  # accepted as a state
