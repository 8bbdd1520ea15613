"""``pyro-dropout rl`` on tiny settings: the DQN's pieces, the command, resuming."""

import json

import numpy as np
import pytest
import torch

from pyro_dropout_experiments.cli import main
from pyro_dropout_experiments.rl import QAgent, Replay, RLSettings, make_env, play, summary
from pyro_dropout_experiments.rl.figure import return_curve

pytest.importorskip("gymnasium")

TINY = ["--batches", "60", "--burn-in", "30", "--hidden", "8", "--batch-size", "16", "--quiet"]


def test_the_replay_buffer_wraps_around_and_samples_what_it_holds():
    replay = Replay(3, 2)
    for i in range(5):
        replay.add(torch.full((2,), float(i)), i % 2, float(i), torch.full((2,), i + 1.0), i == 4)
    assert replay.size == 3 and replay.states[:, 0].tolist() == [3.0, 4.0, 2.0]
    assert replay.terminal.tolist() == [0.0, 1.0, 0.0]
    assert int(replay.sample(100).max()) <= 2


def test_the_td_target_uses_the_frozen_expected_weights_and_stops_at_terminal_states():
    s = RLSettings(batches=10, hidden=4, batch_size=2, target_every=100)
    agent = QAgent("thompson", 2, 2, s, seed=0)
    replay = Replay(2, 2)
    replay.add(torch.zeros(2), 0, 1.0, torch.ones(2), False)
    replay.add(torch.ones(2), 1, 1.0, torch.ones(2), True)
    agent.learn(replay)
    frozen = {k: v.clone() for k, v in agent.target.items()}
    for _ in range(5):
        agent.learn(replay)
    assert all(torch.equal(frozen[k], agent.target[k]) for k in frozen)  # copied every 100 batches only
    assert not all(torch.equal(frozen[k], v) for k, v in agent.guide.median().items())  # still learning


def test_epsilon_falls_from_one_to_its_floor_over_the_annealing_batches():
    s = RLSettings(batches=100, anneal=0.5, epsilon=0.1, hidden=4)
    agent = QAgent("epsilon-greedy", 2, 2, s, seed=0)
    replay = Replay(4, 2)
    replay.add(torch.zeros(2), 0, 1.0, torch.ones(2), False)
    agent.learn(replay)
    agent.act(torch.zeros(2))
    assert agent.chooser.epsilon == pytest.approx(1 - 0.9 * 1 / 50)
    agent.batches = 80
    agent.act(torch.zeros(2))
    assert agent.chooser.epsilon == pytest.approx(0.1)
    assert agent.guide.dropout_rates() == {} or all(
        float(p) == 0 for p in agent.guide.dropout_rates().values()
    )  # the ε-greedy network has no dropout


def test_summary_reads_the_late_return_and_the_first_time_ten_episodes_average_the_threshold():
    episodes = [[b, 10.0] for b in range(0, 90, 10)] + [[100 + b, 200.0] for b in range(10)]
    out = summary(episodes, batches=110, threshold=195)
    assert out["batches_to_threshold"] == 109  # only the last ten episodes average 200
    assert out["late_return"] == pytest.approx(200.0)
    assert summary(episodes[:5], 110)["batches_to_threshold"] is None


def test_the_return_curve_averages_the_episodes_ending_in_each_window():
    curve = return_curve([[11, 1.0], [19, 3.0], [40, 5.0]], np.array([20.0, 50.0, 80.0]), window=0.5)
    assert curve[0] == 2.0 and curve[1] == 5.0 and np.isnan(curve[2])  # windows (10, 20], (25, 50], (40, 80]


def test_a_run_records_episodes_whose_returns_add_up_to_the_steps_taken():
    s = RLSettings(batches=60, burn_in=20, hidden=8, batch_size=8)
    episodes = play("thompson", s, seed=3)
    assert episodes and all(0 <= b <= 60 for b, _ in episodes)
    assert sum(r for _, r in episodes) <= 80  # CartPole pays 1 a step; the last episode may be unfinished
    assert play("thompson", s, seed=3) == episodes  # seeded


def test_rl_writes_both_policies_and_resumes(tmp_path, capsys):
    assert main(["rl", *TINY, "--repeats", "1", "--out", str(tmp_path)]) == 0
    results = json.loads((tmp_path / "results.json").read_text())
    assert set(results["runs"]) == {"thompson", "epsilon-greedy"}
    first = results["runs"]["thompson"]["0"]
    assert first["episodes"] and (tmp_path / "rl.png").stat().st_size > 10_000
    assert "thompson: mean return over the last fifth" in capsys.readouterr().out
    assert main(["rl", *TINY, "--out", str(tmp_path), "--repeats", "2", "--policies", "thompson"]) == 0
    again = json.loads((tmp_path / "results.json").read_text())
    assert again["runs"]["thompson"]["0"] == first and set(again["runs"]["thompson"]) == {"0", "1"}


def test_bad_tasks_and_settings_are_named():
    with pytest.raises(ValueError, match="--env: gymnasium has no task 'NoSuchTask-v0'"):
        make_env("NoSuchTask-v0")
    with pytest.raises(ValueError, match="--env: 'Pendulum-v1' needs discrete actions"):
        make_env("Pendulum-v1")
    with pytest.raises(SystemExit):
        main(["rl", "--gamma", "1.5"])
    with pytest.raises(SystemExit):
        main(["rl", "--policies", "boltzmann"])


def test_thompson_drops_the_state_at_input_dropout_and_the_hidden_units_at_dropout():
    s = RLSettings(hidden=4, dropout=0.2, input_dropout=0.0)
    agent = QAgent("thompson", 2, 2, s, seed=0)
    replay = Replay(4, 2)
    replay.add(torch.zeros(2), 0, 1.0, torch.ones(2), False)
    agent.learn(replay)
    rates = {k: float(v) for k, v in agent.guide.dropout_rates().items()}
    assert rates.get("layers.0.weight", 0.0) == 0.0
    assert rates["layers.1.weight"] == pytest.approx(0.2) and rates["layers.2.weight"] == pytest.approx(0.2)
