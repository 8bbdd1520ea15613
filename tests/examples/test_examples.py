"""Every example runs with tiny arguments."""

import importlib.util
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _load(name):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_uncertainty_analysis(tmp_path):
    out = _load("uncertainty_analysis").main(
        ["--out", str(tmp_path), "--steps", "30", "--num-samples", "20", "--n", "60"]
    )
    assert {"accuracy", "ece", "nll"} <= set(out["report"])
    assert set(out["ood"]) == {"predictive_entropy", "max_prob", "mutual_information", "variation_ratio"}
    for name in ("reliability.png", "ood_histogram.png", "softmax_scatter.png"):
        assert (tmp_path / name).stat().st_size > 5000


def test_core_checks():
    out = _load("core_checks").main(["--steps", "40", "--concrete-steps", "5"])
    assert out["alpha_1e-8_relative_gap"] < 1e-6  # the same figure the BB-alpha tests assert
    assert set(out["learned_p_N10"]) == {"hidden.0.weight", "hidden.1.weight", "output.weight"}


def test_every_example_has_a_test():
    tested = {"uncertainty_analysis", "core_checks"}
    assert {p.stem for p in EXAMPLES.glob("*.py")} <= tested, "add a test for each new example"


@pytest.mark.parametrize("loss", ["elbo", "bbalpha"])
def test_demo_command(tmp_path, loss):
    from pyro_dropout.cli import main

    assert main(["demo", "--out", str(tmp_path), "--steps", "20", "--num-samples", "10", "--loss", loss]) == 0
    assert (tmp_path / "demo.png").stat().st_size > 5000
