"""``pyro_dropout.lightning.SVIModule``: training, validation metrics, prediction and checkpoints
under ``lightning.Trainer``; DDP on two gloo processes against one process (slow)."""

import subprocess
import sys
from pathlib import Path

import pyro
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from pyro_dropout import DropoutELBO, DropoutGuide, predict
from pyro_dropout.nn import MLP

lightning = pytest.importorskip("lightning")
from pyro_dropout.lightning import SVIModule  # noqa: E402

SCRIPT = Path(__file__).resolve().parent / "lightning_ddp.py"


def _data(rows=64):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(rows, 3, generator=g)
    return x, x.sum(-1) + 0.1 * torch.randn(rows, generator=g)


def _module(x, y, **kwargs):
    pyro.set_rng_seed(0)
    pyro.clear_param_store()
    model = MLP(3, 1, hidden=(16,))
    return SVIModule(
        model,
        DropoutGuide(model, dropout=0.1),
        DropoutELBO(),
        num_data=len(x),
        example=(x[:2], y[:2]),
        **kwargs,
    )


def _trainer(tmp_path, **kwargs):
    return lightning.Trainer(
        accelerator="cpu", devices=1, logger=False, enable_progress_bar=False, enable_model_summary=False,
        default_root_dir=tmp_path, **kwargs,
    )  # fmt: skip


def test_a_fit_lowers_the_loss_logs_validation_metrics_and_predicts(tmp_path):
    x, y = _data()
    module = _module(x, y, lr=1e-2, num_samples=20)
    loader = DataLoader(TensorDataset(x, y), batch_size=16)
    trainer = _trainer(tmp_path, max_epochs=30, enable_checkpointing=False)
    before = float(DropoutELBO().loss(module.model, module.guide, x, y))
    trainer.fit(module, loader, loader)
    after = float(DropoutELBO().loss(module.model, module.guide, x, y))
    assert after < 0.75 * before
    metrics = trainer.callback_metrics
    assert {"val_rmse", "val_test_ll", "train_loss"} <= set(metrics) and float(metrics["val_rmse"]) < 1.0
    (out,) = trainer.predict(module, DataLoader(TensorDataset(x[:5]), batch_size=5))
    assert out["obs"].shape == (20, 5)


@pyro.settings.context(module_local_params=True)  # two guides side by side
def test_a_checkpoint_restores_the_guide(tmp_path):
    x, y = _data()
    module = _module(x, y, lr=1e-2)
    trainer = _trainer(tmp_path, max_epochs=3)
    trainer.fit(module, DataLoader(TensorDataset(x, y), batch_size=16))
    path = tmp_path / "fit.ckpt"
    trainer.save_checkpoint(path)
    state = torch.load(path, weights_only=True)["state_dict"]
    fresh = _module(x, y)
    fresh.load_state_dict(state)
    pyro.set_rng_seed(5)
    a = predict(module.model, module.guide, x, num_samples=10)["obs"]
    pyro.set_rng_seed(5)
    b = predict(fresh.model, fresh.guide, x, num_samples=10)["obs"]
    assert torch.equal(a, b)


def test_bad_settings_are_named():
    model = MLP(3, 1, hidden=(4,))
    with pytest.raises(ValueError, match="SVIModule: num_data must be"):
        SVIModule(model, DropoutGuide(model), DropoutELBO(), num_data=0)
    with pytest.raises(ValueError, match="SVIModule: lr must be"):
        SVIModule(model, DropoutGuide(model), DropoutELBO(), lr=-1.0, num_data=4)
    pyro.clear_param_store()
    bare = SVIModule(model, DropoutGuide(model), DropoutELBO(), num_data=4)
    with pytest.raises(RuntimeError, match="give example="):
        bare.configure_optimizers()
    x = torch.randn(4, 3)
    with pytest.raises(ValueError, match=r"example\): a batch must be an \(x, y\) pair, got a Tensor"):
        SVIModule(model, DropoutGuide(model), DropoutELBO(), num_data=4, example=x)
    with pytest.raises(TypeError, match=r"a batch is a dict .* give \(x, y\) batches"):
        bare.training_step({"x": x, "y": torch.randn(4)}, 0)


def _run(tmp_path, devices, mode="equal"):
    out = tmp_path / f"params_{devices}_{mode}.pt"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(devices), str(out), "8", mode],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return torch.load(out, weights_only=True)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["equal", "unequal"])
def test_ddp_on_two_processes_trains_as_one_process_on_the_same_global_batches(tmp_path, mode):
    """Eight SGD steps on global batches of 12 rows: one process, or two gloo processes holding
    6 + 6 (or 8 + 4) rows each. The per-point terms are scaled by N over the global batch and the
    KL is counted once, so the parameters agree to float tolerance (without the correction, the
    unequal shares differ by about 0.02)."""
    one, two = _run(tmp_path, 1), _run(tmp_path, 2, mode)
    assert one.keys() == two.keys()
    for name in one:
        assert torch.allclose(one[name], two[name], atol=1e-6), name


def test_a_pool_scored_by_the_trainer_in_shards_has_the_draws_of_one_pass(tmp_path):
    from pyro_dropout.active import pool_probs
    from pyro_dropout.active.lightning import PoolScoringModule
    from pyro_dropout.metrics import bald

    pyro.clear_param_store()
    model = MLP(3, 4, hidden=(16,), likelihood="categorical")
    guide = DropoutGuide(model, dropout=0.3)
    pool = torch.randn(50, 3, generator=torch.Generator().manual_seed(2))
    guide(pool[:2], torch.zeros(2, dtype=torch.long))
    module = PoolScoringModule(model, guide, pool[:4], num_samples=8, seed=5, keep_probs=True)
    parts = _trainer(tmp_path).predict(module, DataLoader(TensorDataset(pool), batch_size=16))
    probs = torch.cat([p["probs"] for p in parts], dim=1)
    whole = pool_probs(model, guide, pool, num_samples=8, seed=5)
    assert torch.allclose(probs, whole, atol=1e-6)  # the same draws as one pass over the pool
    assert torch.allclose(torch.cat([p["scores"] for p in parts]), bald(whole), atol=1e-6)
    with pytest.raises(ValueError, match="unknown function 'bold'"):
        PoolScoringModule(model, guide, pool[:4], acquisition="bold")


@pytest.mark.slow
def test_a_pool_scored_on_two_processes_has_the_draws_of_one_process(tmp_path):
    """Two gloo processes each score their shard of a 40-row pool; put back in row order, the
    class probabilities are those of one process scoring the whole pool: the same 8 draws."""
    script = Path(__file__).resolve().parent / "lightning_pool_ddp.py"
    for devices in (1, 2):
        done = subprocess.run(
            [sys.executable, str(script), str(devices), str(tmp_path / f"pool{devices}")],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
    one = torch.load(tmp_path / "pool1.rank0", weights_only=True)
    shards = [torch.load(tmp_path / f"pool2.rank{r}", weights_only=True) for r in (0, 1)]
    rows = torch.cat([s["rows"] for s in shards])
    probs = torch.cat([s["probs"] for s in shards], dim=1)[:, rows.argsort()]
    assert sorted(rows.tolist()) == list(range(40)) and len({*shards[0]["rows"].tolist()}) == 20
    assert torch.allclose(probs, one["probs"][:, one["rows"].argsort()], atol=1e-6)
