"""Saved parameters and optimizer states load without running the file's code."""

import pickle

import pyro
import pytest
import torch
from torch.distributions import constraints

from pyro_dropout.infer import JointOptim, load_param_store, safe_load


class _RunsCode:
    """What a crafted file holds: unpickling it would call ``marker.touch()``."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (type(self.marker).touch, (self.marker,))


def _crafted(tmp_path):
    marker = tmp_path / "ran"
    path = tmp_path / "crafted.pt"
    torch.save({"params": {}, "constraints": {}, "x": _RunsCode(marker)}, path)
    return path, marker


def test_a_param_store_round_trips_with_its_constraints(tmp_path):
    pyro.clear_param_store()
    pyro.param("scale", torch.tensor([0.5, 2.0]), constraint=constraints.positive)
    pyro.param("rate", torch.tensor(0.3), constraint=constraints.unit_interval)
    path = tmp_path / "store.pt"
    pyro.get_param_store().save(path)
    pyro.clear_param_store()
    load_param_store(path)
    store = pyro.get_param_store()
    assert torch.allclose(store["scale"], torch.tensor([0.5, 2.0]))
    rate = store.get_state()["constraints"]["rate"]
    assert (type(rate), rate.lower_bound, rate.upper_bound) == (type(constraints.unit_interval), 0.0, 1.0)
    assert float(store["rate"]) == pytest.approx(0.3)  # through its constraint's transform


def test_a_crafted_file_is_refused_and_runs_nothing(tmp_path):
    path, marker = _crafted(tmp_path)
    with pytest.raises(ValueError, match=r"crafted\.pt: holds objects other than tensors"):
        load_param_store(path)
    with pytest.raises(ValueError, match=r"crafted\.pt"):
        JointOptim(torch.optim.Adam, {"lr": 0.1}).load(str(path))
    assert not marker.exists()
    with pytest.raises(pickle.UnpicklingError):  # the check is torch's own
        torch.load(path, weights_only=True)


def test_a_joint_optimizer_state_round_trips(tmp_path):
    pyro.clear_param_store()
    w = pyro.param("w", torch.ones(3))
    optim = JointOptim(torch.optim.Adam, {"lr": 0.1})
    w.grad = torch.ones(3)
    optim([w])
    path = tmp_path / "optim.pt"
    optim.save(str(path))
    again = JointOptim(torch.optim.Adam, {"lr": 0.1})
    again.load(str(path))
    w.grad = torch.ones(3)
    again([w])
    state = again.get_state()["w"]["state"][0]
    assert int(state["step"]) == 2  # the saved step, then one more
    assert isinstance(safe_load(path), dict)


def _saved_store(tmp_path):
    pyro.clear_param_store()
    pyro.param("a", torch.ones(3))
    pyro.param("rate", torch.tensor(0.3), constraint=constraints.interval(0.0, 1.0))
    path = tmp_path / "store.pt"
    pyro.get_param_store().save(path)
    return path


def test_a_saved_store_that_is_not_whole_or_not_a_store_is_refused_naming_the_file(tmp_path):
    """Truncated and empty files gave PyTorch's reader errors or a bare EOFError; a parameter
    without its constraint loaded and failed at the first pyro.param(); a list where a dict
    belongs gave "unhashable list"."""
    path = _saved_store(tmp_path)
    state = pyro.get_param_store().get_state()
    raw = path.read_bytes()
    files = {
        "cut": (raw[: len(raw) // 2], "not a whole file saved by torch.save"),
        "empty": (b"", "not a whole file saved by torch.save"),
    }
    for name, (data, match) in files.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(ValueError, match=rf"{name}: {match}"):
            load_param_store(tmp_path / name)
    shapes = {
        "no-constraint": (
            {"params": state["params"], "constraints": {"a": state["constraints"]["a"]}},
            "'rate' has no constraint",
        ),
        "a-list": ({"params": [1, 2], "constraints": {}}, "'params' and 'constraints' must be dicts by name"),
        "not-a-tensor": (
            {"params": {"a": "x"}, "constraints": {"a": constraints.real}},
            "'a' is not a floating tensor",
        ),
    }
    for name, (saved, match) in shapes.items():
        torch.save(saved, tmp_path / name)
        with pytest.raises(ValueError, match=rf"{name}: parameter {match}|{name}: {match}"):
            load_param_store(tmp_path / name)
    load_param_store(path)  # the whole file loads, its constraint applied
    assert float(pyro.param("rate").detach()) == pytest.approx(0.3)


def test_an_optimizer_state_that_is_not_one_is_refused_naming_the_file(tmp_path):
    pyro.clear_param_store()
    w = pyro.param("w", torch.ones(3))
    torch.save({"w": "garbage"}, tmp_path / "garbage.pt")
    with pytest.raises(ValueError, match=r"garbage.pt: the state of 'w' is not a PyTorch optimizer"):
        JointOptim(torch.optim.Adam, {"lr": 0.1}).load(str(tmp_path / "garbage.pt"))
    other = torch.nn.Parameter(torch.ones(5))
    wrong = torch.optim.Adam([other], lr=0.1)
    other.grad = torch.ones(5)
    wrong.step()
    torch.save({"w": wrong.state_dict()}, tmp_path / "shape.pt")
    optim = JointOptim(torch.optim.Adam, {"lr": 0.1})
    optim.load(str(tmp_path / "shape.pt"))
    w.grad = torch.ones(3)
    with pytest.raises(ValueError, match=r"shape.pt: parameter 'w': its exp_avg has shape \(5,\)"):
        optim([w])
