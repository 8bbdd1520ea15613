"""Every example runs with tiny arguments."""

import math

import pytest
import torch

from tests.scripts import REPO, load_script
from tests.uci_data import write_tiny_uci

EXAMPLES = REPO / "examples"


def _load(name):
    return load_script("examples", name)


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
    verdicts = {name: passed for name, passed, _ in out["checks"]}
    assert set(verdicts) == {"known answer", "BB-alpha as alpha -> 0", "Concrete p falls with N"}
    assert verdicts["BB-alpha as alpha -> 0"]  # the others need the full steps: a slow test runs them


@pytest.mark.slow
def test_core_checks_pass_at_their_defaults():
    out = _load("core_checks").main([])  # about 2 minutes
    assert all(passed for _, passed, _ in out["checks"]), out["checks"]


def test_mask_granularity_runs_every_option(tmp_path):
    """Every path of the script, briefly (the figures it must reach: the slow test below)."""
    root = write_tiny_uci(tmp_path)
    args = [
        "--dataset",
        "tiny",
        "--data-dir",
        str(root),
        "--epochs",
        "20",
        "--num-samples",
        "10",
        "--tau",
        "4",
    ]
    out = _load("mask_granularity").main([*args, "--library-runs", "2"])
    assert set(out) == {"per_example", "per_minibatch", "library"} and len(out["library"]["rmse"]) == 2
    assert all(math.isfinite(out[name]["test_ll"]) for name in ("per_example", "per_minibatch"))
    alone = _load("mask_granularity").main(
        [*args, "--library-runs", "1", "--library-only", "--library-masks", "example"]
    )
    assert set(alone) == {"library"} and len(alone["library"]["rmse"]) == 1


@pytest.mark.slow
def test_mask_granularity(tmp_path):
    root = write_tiny_uci(tmp_path)
    args = ["--dataset", "tiny", "--data-dir", str(root), "--epochs", "2000", "--num-samples", "50"]
    args += ["--tau", "4"]
    out = _load("mask_granularity").main([*args, "--library-runs", "2"])
    # y = 10 + 5 x0 - x1 + N(0, 0.5^2) has std about 5 (RMSE about 3.7 after one epoch); both
    # granularities must learn it
    for name in ("per_example", "per_minibatch"):
        assert out[name]["rmse"] < 1.5 and math.isfinite(out[name]["test_ll"])
    # and so must the library's two runs, which differ only in their random draws
    assert len(out["library"]["rmse"]) == 2 and max(out["library"]["rmse"]) < 1.5
    assert out["library"]["rmse"][0] != out["library"]["rmse"][1]
    alone = _load("mask_granularity").main([*args, "--library-runs", "2", "--library-only"])
    assert set(alone) == {"library"} and alone["library"]["rmse"] == out["library"]["rmse"]
    # the library with one mask per example learns it too, from other random draws
    example = _load("mask_granularity").main(
        [*args, "--library-runs", "2", "--library-only", "--library-masks", "example"]
    )
    assert max(example["library"]["rmse"]) < 1.5 and example["library"]["rmse"] != out["library"]["rmse"]


def test_mask_granularity_masks():
    forward = _load("mask_granularity")._forward
    torch.manual_seed(0)
    x = torch.ones(6, 4)
    params = [torch.eye(4), torch.zeros(4), torch.arange(1.0, 5.0).unsqueeze(-1), torch.zeros(1)]
    shared = forward(x, params, 0.5, per_example=False)
    assert torch.equal(shared, shared[:1].expand(6))  # one mask for every row
    assert len(set(forward(x, params, 0.5, per_example=True).tolist())) > 1  # a mask per row


def test_every_example_has_a_test():
    tested = {
        "uncertainty_analysis",
        "core_checks",
        "mask_granularity",
        "readme_model",
        "kfold_elpd",
        "hmc_vs_dropout",
        "limits",
    }
    assert {p.stem for p in EXAMPLES.glob("*.py")} <= tested, "add a test for each new example"


@pytest.mark.parametrize("loss", ["elbo", "bbalpha"])
def test_demo_command(tmp_path, loss):
    from pyro_dropout_experiments.cli import main

    assert main(["demo", "--out", str(tmp_path), "--steps", "20", "--num-samples", "10", "--loss", loss]) == 0
    assert (tmp_path / "demo.png").stat().st_size > 5000


def test_readme_model():
    out = _load("readme_model").main(["--steps", "20"])
    assert out["layers"]["rates"] == {"fc1.weight": 0.0, "fc2.weight": 0.1}  # none on the one input
    assert out["raw"]["rates"] == {"w1": 0.0, "w2": 0.1}
    for figures in out.values():
        assert math.isfinite(figures["loo_elpd_60"])  # float64 log-likelihoods: no NaN from PSIS
        assert figures["in_range_rmse"] > 0 and figures["sd_outside_over_inside"] > 0


@pytest.mark.parametrize(
    "extra", [["--no-reloo", "--loop"], pytest.param(["--points", "12"], marks=pytest.mark.slow)]
)
def test_kfold_elpd(extra):
    out = _load("kfold_elpd").main(["--steps", "20", "--k", "2", "--num-samples", "10", *extra])
    assert set(out["models"]) == {"relu 1-20-1", "linear"} and len(out["compare_ranks"]) == 2
    for row in out["models"].values():
        assert all(math.isfinite(v) for v in row.values())
        assert ("reloo_per_point" in row) == ("--no-reloo" not in extra)
        assert ("kfold_one_by_one_per_point" in row) == ("--loop" in extra)


@pytest.mark.slow
def test_hmc_vs_dropout(tmp_path):
    args = ["--warmup", "5", "--samples", "5", "--k", "2", "--steps", "10", "--num-samples", "10"]
    folds = ["--hmc-kfold", str(tmp_path / "folds")]
    with pytest.warns(UserWarning, match="Pareto k"):  # five NUTS draws: PSIS cannot be trusted
        out = _load("hmc_vs_dropout").main(args + folds)
    assert out["rows"] == {"train": 455, "test": 51}
    assert set(out["compare"]) == {"hmc (PSIS-LOO)", "mc-dropout (2-fold)", "hmc (2-fold)"}
    assert sorted(row["rank"] for row in out["compare"].values()) == [0.0, 1.0, 2.0]
    assert set(out["compare_kfold"]) == {"mc-dropout (2-fold)", "hmc (2-fold)"}  # like with like
    for name in ("hmc", "mc-dropout", "hmc_kfold"):
        assert all(math.isfinite(v) for v in out[name].values())
    kept = sorted(p.name for p in (tmp_path / "folds").iterdir())
    assert kept == ["fold00.json", "fold01.json"]
    fold0 = tmp_path / "folds" / "fold00.json"
    first = fold0.read_text()
    with pytest.warns(UserWarning, match="Pareto k"):
        again = _load("hmc_vs_dropout").main(args + folds)  # the folds are kept, not rerun
    assert again["hmc_kfold"] == out["hmc_kfold"] and fold0.read_text() == first
    with pytest.raises(ValueError, match="was made with"):
        _load("hmc_vs_dropout").main(["--warmup", "6", *args[2:], *folds])


@pytest.mark.parametrize("hmc_draws", [6, 4])  # 4 draws: NUTS never leaves its start (seed 0)
def test_limits_measures_the_in_between_ratio_and_the_concentration(tmp_path, hmc_draws):
    out = _load("limits").main(
        ["--out", str(tmp_path), "--steps", "20", "--num-samples", "10", "--gp-steps", "20",
         "--hmc-draws", str(hmc_draws), "--sizes", "50", "200"]
    )  # fmt: skip
    methods = out["in_between"]["methods"]
    assert set(methods) == {"mc-dropout", "concrete", "bbalpha-0.5", "hmc", "sparse-gp"}
    stuck = {"hmc"} if hmc_draws == 4 else set()
    assert all(len(m["sd"]) == 400 for m in methods.values())
    assert all(m["ratio"] > 0 for k, m in methods.items() if k not in stuck)
    assert all(m["ratio"] is None and max(m["sd"]) == 0 for k, m in methods.items() if k in stuck)
    assert [len(out["concentration"][k]) for k in ("fixed", "concrete")] == [2, 2]
    for name in ("limits.json", "in_between.png", "concentration.png"):
        assert (tmp_path / name).stat().st_size > 0
