"""The MNIST commands on a tiny folder of images: what they write, and their flags."""

import json

import pytest

from pyro_dropout_experiments.cli import main
from pyro_dropout_experiments.mnist.command import add_mnist  # noqa: F401  (the CLI's import)
from pyro_dropout_experiments.mnist.rotated import rotate

from .image_data import write_tiny_images

TINY = ["--epochs", "2", "--validation", "50", "--num-samples", "8", "--batch-size", "50", "--quiet"]


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    return write_tiny_images(tmp_path_factory.mktemp("images"))


def test_ood_scores_mc_dropout_and_the_methods_sharing_its_network(images, tmp_path, capsys):
    args = [
        "mnist",
        "ood",
        "--data-dir",
        str(images),
        "--out",
        str(tmp_path),
        "--methods",
        "mc-dropout,mc-dropout-temperature,standard",
    ]
    assert main(args + TINY) == 0
    methods = json.loads((tmp_path / "results.json").read_text())["methods"]
    # temperature shares the training, but was not asked for
    assert set(methods) == {"mc-dropout", "mc-dropout-temperature", "standard"}
    assert methods["mc-dropout-temperature"]["info"]["mc_temperature"] > 0
    assert methods["mc-dropout"]["accuracy"] > 0.5  # the bright band gives the class away
    assert 0 <= methods["mc-dropout"]["auroc"]["fashion-mnist"]["mutual_information"] <= 1
    printed = capsys.readouterr().out  # the tables
    assert "| mc-dropout |" in printed and "| OOD AUROC | fashion-mnist: entropy |" in printed


@pytest.mark.slow
def test_ood_writes_every_score_for_every_method(images, tmp_path):
    args = ["mnist", "ood", "--data-dir", str(images), "--out", str(tmp_path), "--ensemble-size", "2"]
    assert main(args + TINY) == 0
    results = json.loads((tmp_path / "results.json").read_text())
    methods = results["methods"]
    assert set(methods) == {
        "mc-dropout",
        "mc-dropout-temperature",
        "standard",
        "temperature",
        "concrete",
        "ensemble",
    }
    for name, scores in methods.items():
        assert {"accuracy", "nll", "brier", "ece", "adaptive_ece", "classwise_ece", "aurc"} <= set(scores)
        for ood in ("fashion-mnist", "notmnist"):
            assert set(scores["auroc"][ood]) == {
                "predictive_entropy",
                "mutual_information",
                "variation_ratio",
                "max_softmax",
            }
        if name in ("standard", "temperature"):  # one pass: no disagreement between passes
            assert scores["auroc"]["notmnist"]["mutual_information"] is None  # printed "n/a"
    assert methods["mc-dropout"]["accuracy"] > 0.5  # the bright band gives the class away
    assert methods["temperature"]["info"]["temperature"] > 0
    assert set(methods["concrete"]["info"]["learned_p"]) == {"fc2.weight"}
    for figure in ("reliability.png", "ood_histograms.png"):
        assert (tmp_path / figure).stat().st_size > 10_000


def test_rotated_writes_the_softmax_per_rotation(images, tmp_path, capsys):
    assert main(["mnist", "rotated", "--data-dir", str(images), "--out", str(tmp_path)] + TINY) == 0
    results = json.loads((tmp_path / "results.json").read_text())
    assert len(results["degrees"]) == 12 and len(results["mean_softmax"]) == 12
    assert all(abs(sum(p) - 1) < 1e-4 for p in results["mean_softmax"])
    assert all(0 <= r <= 1 for r in results["variation_ratio"])
    assert (tmp_path / "rotated.png").stat().st_size > 10_000
    assert "variation ratio" in capsys.readouterr().out


def test_rotation_is_exact_at_right_angles():
    import torch

    image = torch.zeros(1, 5, 5)
    image[0, 0, 2] = 1.0  # the top middle pixel
    turned = rotate(image, [0.0, 90.0])
    assert torch.allclose(turned[0], image, atol=1e-6)
    assert turned[1, 0].argmax() in (2 * 5 + 0, 2 * 5 + 4)  # a quarter turn puts it at a side


def test_bad_flags_and_a_missing_folder_are_one_clear_line(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["mnist", "ood", "--methods", "mc-dropout,magic"])
    assert "unknown methods ['magic']" in capsys.readouterr().err
    out = tmp_path / "out"
    assert main(["mnist", "ood", "--data-dir", str(tmp_path), "--out", str(out), "--quiet"]) == 2
    assert "mnist: no such folder" in capsys.readouterr().err
    assert not out.exists()  # nothing written for a run that could not start


def test_concrete_writes_a_rate_per_layer_per_size_and_width(images, tmp_path, capsys):
    args = ["mnist", "concrete", "--data-dir", str(images), "--out", str(tmp_path), "--sizes", "100,200"]
    args += ["--widths", "16,512", "--min-steps", "4", "--epochs", "1", "--validation", "50", "--quiet"]
    assert main(args + ["--num-samples", "4"]) == 0
    results = json.loads((tmp_path / "results.json").read_text())
    assert set(results["rates"]) == {"100", "200"} and set(results["widths"]) == {"16", "512"}
    for rates in list(results["rates"].values()) + list(results["widths"].values()):
        assert len(rates) == 4 and all(
            0 < p < 1 for p in rates
        )  # the inputs of the 4 weight layers, from 0.1
    assert results["widths"]["512"] == results["rates"]["200"]  # the 3x512 run on the most images
    assert 0 <= results["accuracy"] <= 1
    assert (tmp_path / "concrete_rates.png").stat().st_size > 10_000
    assert "p per layer" in capsys.readouterr().out
