"""The wheel bandit, and ``pyro-dropout bandit`` on tiny settings."""

import itertools
import json

import pytest
import torch

from pyro_dropout_experiments.bandit import wheel_bandit
from pyro_dropout_experiments.cli import main


def test_the_wheel_pays_the_quadrants_arm_outside_the_radius_and_the_safe_arm_inside():
    b = wheel_bandit(0.5, 4000, seed=1)
    radius = b.contexts.double().norm(dim=-1)
    inside = radius <= 0.5
    assert torch.all(b.means[inside].argmax(-1) == 0) and torch.all(b.means[inside, 0] == 1.2)
    big = b.means[~inside].argmax(-1)
    x, y = b.contexts[~inside, 0], b.contexts[~inside, 1]
    assert torch.all(big[(x > 0) & (y > 0)] == 1) and torch.all(big[(x < 0) & (y < 0)] == 4)
    assert float(inside.double().mean()) == pytest.approx(0.25, abs=0.03)  # area of the inner disc
    assert float((b.rewards - b.means.float()).std()) == pytest.approx(0.01, rel=0.1)
    best = b.means.argmax(-1)
    assert float(b.regret(best).abs().max()) == 0 and float(
        b.regret(torch.zeros(4000)).max()
    ) == pytest.approx(48.8)


def test_bad_wheels_are_named():
    with pytest.raises(ValueError, match=r"delta must be in \(0, 1\)"):
        wheel_bandit(1.0, 10)
    with pytest.raises(ValueError, match="n must be a positive int"):
        wheel_bandit(0.5, 0)


def test_bandit_writes_the_regret_of_every_policy(tmp_path, capsys):
    args = ["bandit", "--rounds", "60", "--repeats", "1", "--deltas", "0.5,0.9", "--train-every", "30"]
    args += ["--train-steps", "20", "--hidden", "16", "--out", str(tmp_path), "--quiet"]
    assert main(args) == 0
    results = json.loads((tmp_path / "results.json").read_text())
    assert set(results["deltas"]) == {"0.5", "0.9"}
    for entry in results["deltas"].values():
        assert set(entry) == {"mc-dropout", "concrete", "epsilon-greedy", "uniform"}
        for record in entry.values():
            curve = record["cumulative"]
            assert len(curve) == 60 and all(b >= a for a, b in itertools.pairwise(curve))
        assert entry["uniform"]["normalised"] == [100.0]
    assert (tmp_path / "bandit.png").stat().st_size > 10_000
    assert "δ = 0.9: cumulative regret mc-dropout" in capsys.readouterr().out
