r"""Sparse Gaussian-process regression (Titsias 2009, VFE) with ``pyro.contrib.gp``."""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["fit_sparse_gp"]


def fit_sparse_gp(
    x: torch.Tensor,
    y: torch.Tensor,
    num_inducing: int = 50,
    steps: int = 2000,
    lr: float = 0.01,
    seed: int = 0,
) -> Any:
    r"""Fit a sparse GP (ARD squared-exponential kernel) to standardised ``x`` ``[n, d]``, ``y`` ``[n]``.

    The inducing inputs start at ``num_inducing`` random training inputs and are learned with
    the kernel hyper-parameters and the noise variance by Adam on the VFE bound.
    Returns the fitted ``SparseGPRegression``; call it as ``model(x_new, noiseless=False)``.
    """
    import pyro
    import pyro.contrib.gp as gp

    pyro.clear_param_store()
    g = torch.Generator().manual_seed(seed)
    inducing = x[torch.randperm(len(x), generator=g)[:num_inducing]].clone()
    kernel = gp.kernels.RBF(input_dim=x.shape[1], lengthscale=torch.ones(x.shape[1], dtype=x.dtype))
    model = gp.models.SparseGPRegression(
        x, y, kernel, Xu=inducing, noise=torch.tensor(0.1, dtype=x.dtype), approx="VFE", jitter=1e-5
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    gp.util.train(model, optimizer, pyro.infer.Trace_ELBO().differentiable_loss, num_steps=steps)
    return model
