"""``pyro-dropout active-learning`` on tiny settings: the runs, the table, resuming, Repeated MNIST."""

import json

import pytest

from pyro_dropout_experiments.active.figure import active_table
from pyro_dropout_experiments.active.run import images_to_reach
from pyro_dropout_experiments.cli import main

from ..image_data import write_tiny_images

TINY = [
    "--pool-size", "200", "--test-size", "60", "--max-labels", "30", "--k", "5", "--epochs", "2",
    "--subset", "60", "--num-samples", "4", "--batch-size", "32", "--repeats", "1", "--quiet",
]  # fmt: skip


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    return write_tiny_images(tmp_path_factory.mktemp("images"), train=200, test=60)


def test_each_function_runs_from_the_balanced_start_and_a_rerun_resumes(images, tmp_path, capsys):
    args = ["active-learning", "--data-dir", str(images), "--out", str(tmp_path), *TINY]
    assert main([*args, "--acquisitions", "bald,random"]) == 0
    results = json.loads((tmp_path / "results.json").read_text())
    assert set(results["runs"]) == {"bald", "random"}
    run = results["runs"]["bald"]["0"]
    assert run["labelled"] == [20, 25, 30]  # two of each digit, then k = 5 a round to max_labels
    assert all(0 <= e <= 1 for e in run["error"]) and len(run["error"]) == 3
    assert all(0 <= e <= 1 for e in run["error_dropout_off"]) and len(run["error_dropout_off"]) == 3
    assert (tmp_path / "active_learning.png").stat().st_size > 0
    assert "| bald | 1 |" in capsys.readouterr().out
    kept = (tmp_path / "results.json").read_text()
    before = json.loads(kept)
    for added in ("steps", "weight_decay"):  # a file written before they existed: made as 0 makes it
        del before["settings"][added]
    (tmp_path / "results.json").write_text(json.dumps(before))
    assert main([*args, "--acquisitions", "bald"]) == 0  # resumed, nothing to redo
    assert main([*args, "--acquisitions", "bald,random,max_entropy"]) == 0  # adds the new one only
    again = json.loads((tmp_path / "results.json").read_text())
    assert set(again["runs"]) == {"bald", "random", "max_entropy"}
    assert again["runs"]["bald"] == json.loads(kept)["runs"]["bald"]
    assert main([*args, "--acquisitions", "bald", "--epochs", "3"]) != 0  # other settings: refused
    assert "holds results made with other settings (epochs=2 there, 3 here)" in capsys.readouterr().err
    for field, value, said in (
        ("to_0.1", "many", "to_0.1 = 'many', not a number"),
        ("error", "x", "not a dict of lists"),
    ):
        edited = json.loads(kept)
        edited["runs"]["bald"]["0"][field] = value  # a kept file edited by hand, or damaged
        (tmp_path / "results.json").write_text(json.dumps(edited))
        assert main([*args, "--acquisitions", "bald"]) != 0
        assert said in capsys.readouterr().err


@pytest.mark.slow
def test_repeated_mnist_counts_the_copies_each_function_acquired(images, tmp_path):
    args = ["active-learning", "--data-dir", str(images), "--out", str(tmp_path), *TINY]
    assert main([*args, "--copies", "3", "--acquisitions", "batch_bald", "--subset", "0"]) == 0
    run = json.loads((tmp_path / "results.json").read_text())["runs"]["batch_bald"]["0"]
    assert 0 <= run["repeats_acquired"] <= 10


def test_bad_settings_are_one_clear_line(images, tmp_path, capsys):
    base = ["active-learning", "--data-dir", str(images), "--out", str(tmp_path / "x"), *TINY]
    with pytest.raises(SystemExit):
        main([*base, "--acquisitions", "bold"])
    assert "unknown acquisitions ['bold']; choose from bald" in capsys.readouterr().err
    assert main([*base, "--pool-size", "5000"]) != 0
    assert "--pool-size 5000 is more than the 200 MNIST images" in capsys.readouterr().err
    assert main([*base, "--max-labels", "10"]) != 0
    assert "fewer than the 20 initial labels" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # BALD twice ran it twice
        main([*base, "--acquisitions", "bald,bald"])
    assert "acquisitions ['bald'] named more than once" in capsys.readouterr().err
    assert main([*base, "--max-labels", "500"]) != 0  # before any round's work
    assert "--max-labels 500 is more than the pool's 200 images" in capsys.readouterr().err


def test_the_table_gives_the_images_to_each_error_and_says_when_runs_never_got_there():
    assert images_to_reach([20, 30, 40], [0.3, 0.09, 0.04], 0.10) == 30
    assert images_to_reach([20, 30], [0.3, 0.2], 0.05) is None
    run = {"error": [0.3, 0.04], "to_0.1": 30, "to_0.05": None}
    table = active_table({"runs": {"bald": {"0": run, "1": {**run, "to_0.05": 30}}}})
    assert "| bald | 2 | 30 | 30 (1 of 2 runs) | 4.00% |" in table


def test_steps_add_passes_until_a_round_has_taken_them():
    from pyro_dropout_experiments.active.model import passes
    from pyro_dropout_experiments.active.settings import ActiveSettings

    s = ActiveSettings(epochs=50, batch_size=128, steps=400)
    assert passes(20, s) == 400  # one minibatch a pass: 400 passes
    assert passes(300, s) == 134  # three minibatches a pass: ceil(400 / 3)
    assert passes(1000, s) == 50  # eight a pass: the 50 epochs already take 400 steps
    assert passes(20, ActiveSettings(epochs=50, steps=0)) == 50  # steps 0: the epochs alone


def test_the_paper_table_sets_each_mark_beside_the_papers_count():
    from pyro_dropout_experiments.active.figure import PAPER_TABLE_1, paper_table

    run = {"error": [0.3, 0.04], "to_0.1": 200, "to_0.05": 600}
    results = {"runs": {"bald": {"0": run, "1": {**run, "to_0.1": 220, "to_0.05": None}}}}
    ten, five = PAPER_TABLE_1["bald"]
    at_ten = paper_table([("ours", results)])
    assert f"| bald | {ten} | {1.5 * ten:.0f} | 210 |" in at_ten
    assert "| random | 255 | 382 | not run |" in at_ten
    at_five = paper_table([("ours", results)], error=0.05)
    assert f"| bald | {five} | {1.5 * five:.0f} | 600 (1 of 2 runs) |" in at_five
    assert "| bald | 145 | 218 | not recorded |" in paper_table([("ours", results)], dropout_off=True)
    off = {"runs": {"bald": {"0": {**run, "to_0.1_dropout_off": 150}}}}
    assert "| bald | 145 | 218 | 150 |" in paper_table([("ours", off)], dropout_off=True)
    with pytest.raises(ValueError, match="paper's marks"):
        paper_table([("ours", results)], error=0.2)


def test_weight_decay_gives_the_first_dense_layer_the_authors_decay_and_leaves_the_rest():
    """Per image, the KL of a weight of mean M under dropout p is l^2 M^2 / (2N(1 - p)) (maths.md);
    the authors' Keras decay is (c/N) M^2: so l^2 / (2(1 - p)) = c on fc1 alone."""
    import math

    from pyro_dropout_experiments.active.model import DENSE_RATE, network
    from pyro_dropout_experiments.active.settings import ActiveSettings

    plain, decayed = network(ActiveSettings()), network(ActiveSettings(weight_decay=3.5))
    length = 1 / float(decayed.fc1.prior_weight_scale)
    assert length**2 / (2 * (1 - DENSE_RATE)) == pytest.approx(3.5, rel=1e-6)
    assert float(decayed.fc1.prior_bias_scale) == pytest.approx(1 / math.sqrt(0.1))
    for name in ("conv1", "conv2", "fc2"):
        assert float(getattr(decayed, name).prior_weight_scale) == pytest.approx(1 / math.sqrt(0.1))
    assert float(plain.fc1.prior_weight_scale) == pytest.approx(1 / math.sqrt(0.1))


def test_the_dropout_off_error_is_one_pass_at_the_expected_weights_and_draws_nothing(images):
    import pyro
    import torch

    from pyro_dropout.prediction import predict_standard
    from pyro_dropout_experiments.active.model import fitter, load_pool
    from pyro_dropout_experiments.active.run import dropout_off_error
    from pyro_dropout_experiments.active.settings import ActiveSettings

    s = ActiveSettings(epochs=2, test_size=60)
    x, y, x_test, y_test = load_pool(s, images)
    pair = fitter(s, 0)(x[:40], y[:40])
    pyro.set_rng_seed(3)
    state = torch.get_rng_state()
    error = dropout_off_error(pair, x_test, y_test, rows=16)  # in four parts, the last of 12 rows
    assert torch.equal(torch.get_rng_state(), state)
    whole = predict_standard(*pair, x_test)
    probs = whole.probs["obs"]  # KerasCNN's likelihood site
    assert error == int((probs[0].argmax(-1) != y_test).sum()) / len(y_test)


def test_pooled_keeps_every_run_of_each_file_apart():
    from pyro_dropout_experiments.active.figure import active_table, pooled

    a = {"runs": {"bald": {"0": {"error": [0.04], "to_0.1": 200, "to_0.05": None}}}}
    b = {"runs": {"bald": {"0": {"error": [0.02], "to_0.1": 240, "to_0.05": 400}}, "random": {}}}
    both = pooled(a, b)
    assert sorted(both["runs"]["bald"]) == ["0:0", "1:0"] and both["runs"]["random"] == {}
    table = active_table({"runs": {"bald": both["runs"]["bald"]}})
    assert "| bald | 2 | 220 | 400 (1 of 2 runs) | 3.00% |" in table
