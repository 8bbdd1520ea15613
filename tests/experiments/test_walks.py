"""Following ``uci``'s method and ``mnist ood``'s settings through the calls (``tools/walk.py``),
no file of the packages is entered more than twice."""

from __future__ import annotations

import pytest

from pyro_dropout_experiments.cli import main
from pyro_dropout_experiments.mnist import MnistSettings
from pyro_dropout_experiments.uci import Method
from tests.scripts import load_script

from .image_data import write_tiny_images

pytestmark = pytest.mark.slow  # each walk profiles every call of a command: about half a minute


def test_the_uci_method_enters_no_file_more_than_twice(tiny, capsys):
    walk = load_script("tools", "walk")
    argv = ["uci", "--dataset", "tiny", "--method", "mc-dropout", "--data-dir", str(tiny), "--quiet"]
    argv += ["--out", str(tiny / "out"), "--splits", "0", "--epochs-multiplier", "1", "--num-samples", "8"]
    entries = walk.walk(lambda: main(argv), Method)
    files = walk.entered(entries)
    assert "experiments/pyro_dropout_experiments/uci/runs.py" in files  # the walk reached the training
    assert max(files.values()) <= 2, files


def test_the_mnist_ood_settings_enter_no_file_more_than_twice(tmp_path, capsys):
    walk = load_script("tools", "walk")
    images = write_tiny_images(tmp_path / "images", train=120, test=20)
    argv = [
        "mnist",
        "ood",
        "--methods",
        "mc-dropout",
        "--data-dir",
        str(images),
        "--out",
        str(tmp_path / "o"),
    ]
    argv += ["--epochs", "1", "--validation", "40", "--num-samples", "4", "--batch-size", "40", "--quiet"]
    entries = walk.walk(lambda: main(argv), MnistSettings)
    files = walk.entered(entries)
    assert "experiments/pyro_dropout_experiments/mnist/training.py" in files
    assert max(files.values()) <= 2, files
