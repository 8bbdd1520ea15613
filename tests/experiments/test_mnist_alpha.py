"""``pyro-dropout mnist bbalpha`` and ``mnist adversarial`` on a tiny folder of images: what
they write, that a rerun resumes, and their flags."""

import json

import pytest

from pyro_dropout.infer import BBAlpha, DropoutELBO
from pyro_dropout_experiments.cli import main
from pyro_dropout_experiments.mnist.alpha_training import alpha_loss

from .image_data import write_tiny_images

TINY = ["--epochs", "2", "--validation", "50", "--batch-size", "50", "--quiet"]


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    return write_tiny_images(tmp_path_factory.mktemp("images"))


def test_alpha_zero_is_the_elbo_with_as_many_particles_and_per_example_masks():
    elbo, energy = alpha_loss(0.0, 10), alpha_loss(0.5, 10)
    assert isinstance(elbo, DropoutELBO) and elbo.num_particles == 10 and elbo.per_example_masks
    assert isinstance(energy, BBAlpha) and energy.alpha == 0.5 and energy.num_particles == 10


def _bbalpha(images, out, models, repeats):
    args = ["mnist", "bbalpha", "--data-dir", str(images), "--out", str(out), "--num-samples", "6"]
    args += ["--models", models, "--repeats", str(repeats), "--particles", "3", "--alphas", "0,0.5,1", *TINY]
    assert main(args) == 0
    return json.loads((out / "results.json").read_text())


def test_bbalpha_scores_each_alpha_and_a_rerun_resumes(images, tmp_path, capsys):
    results = _bbalpha(images, tmp_path, "mlp", 1)
    assert set(results["mlp"]) == {"0", "0.5", "1"} and "cnn" not in results
    for scores in results["mlp"].values():
        assert len(scores["accuracy"]) == 1 and 0 <= scores["accuracy"][0] <= 1 and scores["test_ll"][0] < 0
    assert len(results["seconds"]["mlp"]) == 3 and (tmp_path / "bbalpha.png").stat().st_size > 10_000
    assert "mlp α=0.5: accuracy" in capsys.readouterr().out
    assert _bbalpha(images, tmp_path, "mlp", 1)["seconds"] == results["seconds"]  # nothing trained again
    more = _bbalpha(images, tmp_path, "mlp", 2)  # one more training of each α, the first ones kept
    assert more["seconds"]["mlp"][:3] == results["seconds"]["mlp"] and len(more["seconds"]["mlp"]) == 6
    assert [s["accuracy"][0] for s in more["mlp"].values()] == [
        s["accuracy"][0] for s in results["mlp"].values()
    ]


def test_an_edited_result_with_lists_of_different_lengths_is_refused(images, tmp_path, capsys):
    results = _bbalpha(images, tmp_path, "mlp", 1)
    results["mlp"]["0.5"]["accuracy"] *= 3  # three accuracies against one test LL
    (tmp_path / "results.json").write_text(json.dumps(results))
    args = ["mnist", "bbalpha", "--data-dir", str(images), "--out", str(tmp_path), "--num-samples", "6"]
    args += ["--models", "mlp", "--particles", "3", "--alphas", "0,0.5,1", *TINY]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "mlp at alpha 0.5 holds lists of different lengths {'accuracy': 3, 'test_ll': 1}" in err


@pytest.mark.slow
def test_bbalpha_trains_the_keras_cnn(images, tmp_path):
    results = _bbalpha(images, tmp_path, "cnn", 1)
    assert set(results["cnn"]) == {"0", "0.5", "1"}
    assert (
        min(s["accuracy"][0] for s in results["cnn"].values()) > 0.5
    )  # the bright band gives the class away


def test_adversarial_writes_both_attacks_for_every_network(images, tmp_path):
    args = ["mnist", "adversarial", "--data-dir", str(images), "--out", str(tmp_path), "--width", "40"]
    args += ["--depth", "2", "--test-samples", "4", "--etas", "0,0.2,0.5", "--target-steps", "3", *TINY]
    args += ["--epochs", "10"]  # enough steps for p = 0.5 on the inputs to learn the bright bands
    assert main(args) == 0
    results = json.loads((tmp_path / "results.json").read_text())
    networks = {"mlp", "alpha_0", "alpha_0.5", "alpha_1"}
    assert set(results["untargeted"]) == set(results["targeted"]) == set(results["clean"]) == networks
    for name, r in results["untargeted"].items():
        assert r["eta"] == [0.0, 0.2, 0.5] and len(r["accuracy"]) == len(r["entropy"]) == 3
        assert all(0 <= v <= 1 for v in r["auroc_entropy"] + r["auroc_mutual_information"])
        assert results["clean"][name]["accuracy"] > 0.5 and r["accuracy"][-1] < r["accuracy"][0] - 0.2
        assert ("single_draw" in r) == (name != "mlp")
        assert len(r["example"]) == 3 and len(r["example"][0]) == 28
    assert results["untargeted"]["mlp"]["mutual_information"] == [0.0, 0.0, 0.0]  # one function
    for r in results["targeted"].values():
        assert r["step"] == [1, 2, 3] and len(r["target_accuracy"]) == 3
        assert r["target_accuracy"][-1] >= r["target_accuracy"][0]
    for figure in ("untargeted.png", "targeted.png"):
        assert (tmp_path / figure).stat().st_size > 10_000


@pytest.mark.parametrize(
    "flags, message",
    [(["--models", "rnn"], "unknown models"), (["--particles", "0"], "must be positive")],
)
def test_bad_flags_are_named(flags, message, capsys):
    with pytest.raises(SystemExit):
        main(["mnist", "bbalpha", *flags])
    assert message in capsys.readouterr().err
