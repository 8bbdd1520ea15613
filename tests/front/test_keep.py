"""Keeping a front door: saved, loaded in a fresh process, the same draws under the same seed; a
crafted or damaged file refused by name, running nothing; the refined network as a plain module."""

import copy
import pickle
import subprocess
import sys

import pytest
import torch
from torch import nn

from pyro_dropout import MCDropout, predict_standard
from pyro_dropout.runtime import file_mode


def _fitted(tmp_path):
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(1, 16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 2))
    torch.save(net.state_dict(), tmp_path / "net.pt")  # the user's trained network, kept their way
    x, y = torch.randn(64, 1), torch.randint(0, 2, (64,))  # one input: a [16, 1] weight
    bnn = MCDropout(copy.deepcopy(net), "classification", num_samples=20)
    bnn.fit([(x[:32], y[:32]), (x[32:], y[32:])], epochs=3, lr=1e-2)
    return net, bnn, x


_LOAD = """
import sys, torch
from torch import nn
from pyro_dropout import MCDropout, predict_standard
from pyro_dropout.runtime import file_mode
net = nn.Sequential(nn.Linear(1, 16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 2))
net.load_state_dict(torch.load(sys.argv[1] + "/net.pt", weights_only=True))
bnn = MCDropout.load(sys.argv[1] + "/front.pt", net)
torch.manual_seed(5)
torch.save(bnn.probs(torch.load(sys.argv[1] + "/x.pt")), sys.argv[1] + "/probs.pt")
print(bnn)
"""


def test_a_saved_front_door_draws_the_same_in_a_fresh_process(tmp_path):
    _, bnn, x = _fitted(tmp_path)
    bnn.save(tmp_path / "front.pt")
    torch.save(x[:8], tmp_path / "x.pt")
    torch.manual_seed(5)
    here = bnn.probs(x[:8])
    out = subprocess.run(
        [sys.executable, "-c", _LOAD, str(tmp_path)], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert torch.equal(torch.load(tmp_path / "probs.pt"), here)  # the same draws, bit for bit
    assert "num_samples=20" in out.stdout


def test_a_regression_keeps_its_noise_level_and_where_it_came_from(tmp_path):
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Dropout(0.1), nn.Linear(8, 1)).eval()
    x = torch.randn(50, 2)
    bnn = MCDropout(copy.deepcopy(net), "regression")
    bnn.calibrate(x, x[:, 0])
    bnn.save(tmp_path / "front.pt")
    back = MCDropout.load(tmp_path / "front.pt", net)
    assert back.noise == bnn.noise and back.model.tau == bnn.model.tau


def test_to_module_is_the_network_with_the_refined_means(tmp_path):
    net, bnn, x = _fitted(tmp_path)
    module = bnn.to_module()
    assert type(module) is nn.Sequential and not module.training
    means = bnn.guide.median()
    assert torch.equal(module[0].weight, means["net.0.weight"]) and torch.equal(
        module[3].bias, means["net.3.bias"]
    )
    assert not torch.equal(module[0].weight, net[0].weight)  # the fit moved them
    standard = predict_standard(bnn.model, bnn.guide, x).samples["logits"][0]  # the library's own
    with torch.no_grad():  # standard dropout's prediction: the network at the expected weights
        assert torch.allclose(module(x), standard, atol=1e-6)


def test_damaged_or_crafted_files_are_refused_by_name_and_run_nothing(tmp_path):
    net, bnn, _ = _fitted(tmp_path)
    path = bnn.save(tmp_path / "front.pt")
    assert path.stat().st_mode & 0o777 == file_mode()  # as open() would make it, not mkstemp's 0600
    raw = path.read_bytes()
    cases = {
        "truncated.pt": raw[: len(raw) // 2],
        "empty.pt": b"",
        "pickle.pt": pickle.dumps(type("Evil", (), {"__reduce__": lambda self: (print, ("ran",))})()),
    }
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(ValueError, match=f"{name}: not a file written by MCDropout.save"):
            MCDropout.load(tmp_path / name, net)
    state = torch.load(path, weights_only=True)
    state["params"]["{front}.locs.net.0.weight"] = torch.zeros(5, 5)
    torch.save(state, tmp_path / "shape.pt")
    with pytest.raises(ValueError, match=r"locs.net.0.weight' has shape \(5, 5\), the network's \(16, 1\)"):
        MCDropout.load(tmp_path / "shape.pt", net)
    other = nn.Sequential(nn.Linear(1, 16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 16), nn.Linear(16, 2))
    with pytest.raises(ValueError, match="do not match this network's"):
        MCDropout.load(path, other)
    (tmp_path / "link.pt").symlink_to(tmp_path / "elsewhere.pt")
    with pytest.raises(ValueError, match="symbolic link"):
        bnn.save(tmp_path / "link.pt")
    assert not (tmp_path / "elsewhere.pt").exists()


def test_to_moves_a_fitted_front_door_and_keeps_its_draws(tmp_path):
    """``.to(device)`` after a fit builds the front door again there from its state: the same
    means, the same draws under a seed, the same object (here to the CPU it is on: the GPU's
    case is tests/test_cuda.py's)."""
    net, bnn, x = _fitted(tmp_path)
    torch.manual_seed(5)
    before = bnn.probs(x)
    means = bnn.guide.median()
    assert bnn.to("cpu") is bnn and bnn.device == torch.device("cpu")
    torch.manual_seed(5)
    assert torch.equal(bnn.probs(x), before)
    assert all(torch.equal(v, means[k]) for k, v in bnn.guide.median().items())
    bnn.fit([(x, torch.zeros(64, dtype=torch.long))], epochs=1)  # it trains on from there
    fresh = MCDropout(net, "classification").to("cpu")  # before its first call: the copy moves
    assert fresh.device == torch.device("cpu") and fresh.predict(x).probs["obs"].shape[1:] == (64, 2)
