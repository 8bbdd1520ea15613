"""Trains a small model with ``SVIModule`` on 1 or 2 CPU processes (DDP over gloo) and saves its
parameters: ``python tests/lightning_ddp.py DEVICES OUT [STEPS] [equal|unequal]``. Run by
``tests/test_lightning.py``. ``unequal``: of each global batch of 12 rows, rank 0 holds 8, rank 1 4."""

import os
import sys

import lightning
import pyro
import torch
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from pyro_dropout import DropoutELBO, DropoutGuide
from pyro_dropout.lightning import SVIModule
from pyro_dropout.nn import MLP

ROWS, GLOBAL_BATCH = 48, 12
STEPS = int(sys.argv[3]) if len(sys.argv) > 3 else 8


def main(devices: int, out: str) -> None:
    pyro.set_rng_seed(0)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(ROWS, 3, generator=g)
    y = x.sum(-1) + 0.1 * torch.randn(ROWS, generator=g)
    model = MLP(3, 1, hidden=(8,))
    guide = DropoutGuide(model, dropout=0.0)  # no masks: both runs are deterministic
    module = SVIModule(
        model, guide, DropoutELBO(), lr=1e-3, num_data=ROWS, example=(x[:2], y[:2]), optimizer=torch.optim.SGD
    )  # SGD: Adam's first steps turn float noise in near-zero gradients into whole steps
    # rank r of 2 holds rows r, r + 2, ... of each global batch: together, the global batch.
    # (Lightning's own distributed sampler would shuffle: it sets shuffle=True for training.)
    data, rank = TensorDataset(x, y), int(os.environ.get("LOCAL_RANK", 0))
    if devices > 1 and len(sys.argv) > 4 and sys.argv[4] == "unequal":
        share = range(0, 8) if rank == 0 else range(8, 12)
        loader = DataLoader(
            data, batch_sampler=[[k + i for i in share] for k in range(0, ROWS, GLOBAL_BATCH)]
        )
    else:
        sampler = DistributedSampler(data, devices, rank, shuffle=False)
        loader = DataLoader(data, batch_size=GLOBAL_BATCH // devices, sampler=sampler)
    trainer = lightning.Trainer(
        max_steps=STEPS,
        accelerator="cpu",
        devices=devices,
        strategy="ddp" if devices > 1 else "auto",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        use_distributed_sampler=False,
    )
    trainer.fit(module, loader)
    if trainer.global_rank == 0:
        torch.save({k: v.detach().clone() for k, v in module.state_dict().items()}, out)


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2])
