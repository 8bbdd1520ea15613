"""``pyro-dropout dynamics`` on tiny settings: the planner, the data split, the command."""

import json

import pytest
import torch

from pyro_dropout_experiments.cli import main
from pyro_dropout_experiments.dynamics import CartPoleScales, DynamicsModel, Transitions, plan

pytest.importorskip("gymnasium")

TINY = ["--episodes", "2", "--train-steps", "20", "--steps", "15", "--hidden", "8", "--draws", "5"]
TINY += ["--candidates", "8", "--horizon", "3", "--quiet"]


def _scales():
    return CartPoleScales(
        torch.zeros(2, 4) + torch.tensor([[0.0], [1.0]]), torch.ones(2, 4) * torch.tensor([[0.0], [2.0]])
    )


def test_the_planner_pushes_the_pole_back_up_under_known_dynamics():
    # a pole leaning right (θ > 0) falls further unless pushed right: Δθ = 0.1 θ + 0.02 (2a - 1)
    def change(x):  # standardised inputs: (state - mean) / sd, action as ±1
        state = x[:, :4] * 0.7071 + 0.5
        out = torch.zeros(len(x), 4)
        out[:, 2] = 0.1 * state[:, 2] + 0.02 * x[:, 4]
        return out / 1.4142

    scales = _scales()
    g = torch.Generator().manual_seed(0)
    right = plan(change, torch.tensor([0.0, 0.0, 0.1, 0.0]), scales, (2.4, 0.2), 64, 5, g)
    left = plan(change, torch.tensor([0.0, 0.0, -0.1, 0.0]), scales, (2.4, 0.2), 64, 5, g)
    assert (right, left) == (0, 1)  # Δθ falls with a push to the left (action 0): it rights the pole


def test_the_scales_standardise_states_and_append_the_action_as_plus_or_minus_one():
    scales = _scales()
    x = scales.inputs(torch.tensor([[0.5, 0.5, 0.5, 0.5]]), torch.tensor([1]))
    assert torch.allclose(x, torch.tensor([[0.0, 0.0, 0.0, 0.0, 1.0]]))
    assert torch.allclose(scales.change_sd, torch.full((4,), 1.4142), atol=1e-4)


def test_transitions_hold_out_a_share_and_give_changes():
    data = Transitions(0.3, torch.Generator().manual_seed(1))
    for i in range(200):
        data.add(torch.full((4,), float(i)), i % 2, torch.full((4,), i + 2.0))
    held = sum(data.held_out)
    assert 40 <= held <= 80  # 60 expected
    states, actions, changes = data.tensors(held_out=True)
    assert len(states) == held and torch.all(changes == 2.0) and set(actions.tolist()) <= {0, 1}


def test_the_model_predicts_one_change_per_state_component_with_a_precision_each():
    model = DynamicsModel(5, 4, hidden=8)
    assert [layer.dropout for layer in model.layers] == [0.1, 0.1, 0.1]
    assert model.change(torch.randn(3, 5)).shape == (3, 4)


# episodes of the command end to end (40 s): slow
@pytest.mark.slow
def test_dynamics_records_rates_and_uncertainty_per_episode_and_resumes(tmp_path, capsys):
    assert main(["dynamics", *TINY, "--out", str(tmp_path)]) == 0
    results = json.loads((tmp_path / "results.json").read_text())
    assert set(results["runs"]) == {"concrete", "fixed"}
    for agent, runs in results["runs"].items():
        episodes = runs["0"]["episodes"]
        assert [e["episodes_seen"] for e in episodes] == [2, 3]
        for e in episodes:
            assert len(e["rates"]) == 3 and len(e["epistemic_sd"]) == 4 and 1 <= e["return"] <= 15
            assert all(sd > 0 for sd in e["epistemic_sd"])
        if agent == "fixed":
            assert all(p == pytest.approx(0.1) for e in episodes for p in e["rates"])
    concrete = results["runs"]["concrete"]["0"]["episodes"]
    assert any(p != pytest.approx(0.1, abs=1e-4) for p in concrete[-1]["rates"])  # learned
    assert (tmp_path / "dynamics.png").stat().st_size > 10_000
    assert "concrete (seed 0): p per layer" in capsys.readouterr().out
    assert main(["dynamics", *TINY, "--out", str(tmp_path), "--agents", "fixed"]) == 0
    again = json.loads((tmp_path / "results.json").read_text())
    assert again["runs"] == results["runs"]  # nothing new to run


def test_bad_dynamics_settings_are_named():
    with pytest.raises(SystemExit):
        main(["dynamics", "--agents", "pilco"])
    with pytest.raises(SystemExit):
        main(["dynamics", "--validation", "0.9"])
