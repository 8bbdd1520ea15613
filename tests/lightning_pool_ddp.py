"""Scores a pool with ``PoolScoringModule`` on 1 or 2 CPU processes (DDP over gloo), each rank its
shard, and saves each rank's rows and class probabilities: ``python tests/lightning_pool_ddp.py
DEVICES OUT``. Run by ``tests/test_lightning.py``."""

import os
import sys

import lightning
import pyro
import torch
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from pyro_dropout import DropoutGuide
from pyro_dropout.active.lightning import PoolScoringModule
from pyro_dropout.nn import MLP

ROWS = 40


def main(devices: int, out: str) -> None:
    pyro.set_rng_seed(0)  # every rank builds the same network (a trained one would be loaded)
    model = MLP(3, 4, hidden=(16,), likelihood="categorical")
    guide = DropoutGuide(model, dropout=0.3)
    pool = torch.randn(ROWS, 3, generator=torch.Generator().manual_seed(2))
    guide(pool[:2], torch.zeros(2, dtype=torch.long))
    module = PoolScoringModule(model, guide, pool[:4], num_samples=8, seed=5, keep_probs=True)
    rank = int(os.environ.get("LOCAL_RANK", 0))
    data = TensorDataset(pool, torch.arange(ROWS))  # the rows' indices ride along
    sampler = DistributedSampler(data, devices, rank, shuffle=False)
    trainer = lightning.Trainer(
        accelerator="cpu", devices=devices, strategy="ddp" if devices > 1 else "auto", logger=False,
        enable_progress_bar=False, enable_model_summary=False, use_distributed_sampler=False,
    )  # fmt: skip
    loader = DataLoader(data, batch_size=8, sampler=sampler)
    parts = trainer.predict(module, loader)
    rows = torch.cat([batch[1] for batch in loader])
    probs = torch.cat([p["probs"] for p in parts], dim=1)
    torch.save({"rows": rows, "probs": probs}, f"{out}.rank{trainer.global_rank}")


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2])
