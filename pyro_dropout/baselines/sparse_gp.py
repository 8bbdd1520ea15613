r"""Sparse Gaussian-process regression (Titsias 2009, VFE) with ``pyro.contrib.gp``."""

from __future__ import annotations

from typing import Any

import torch

from ..ops import check_seed, is_positive_int
from .gp import check_regression_data

__all__ = ["fit_sparse_gp"]


def fit_sparse_gp(
    x: torch.Tensor,
    y: torch.Tensor,
    num_inducing: int = 50,
    steps: int = 2000,
    lr: float = 0.01,
    seed: int = 0,
    noise_floor: float = 1e-6,
) -> Any:
    r"""Fit a sparse GP (ARD squared-exponential kernel) to standardised ``x`` ``[n, d]``, ``y`` ``[n]``.

    The inducing inputs start at ``num_inducing`` random training inputs (all of them where there
    are fewer) and are learned with
    the kernel hyper-parameters and the noise variance by Adam on the VFE bound. The GP works
    in float64 with the noise variance kept above ``noise_floor``: on nearly noise-free data
    (the naval data set) the noise variance falls towards zero and the Cholesky factor of
    :math:`I + W^\top D^{-1} W` fails in float32.
    Returns the fitted ``SparseGPRegression``, in float64; call it as
    ``model(x_new.double(), noiseless=False)``.
    """
    import pyro
    import pyro.contrib.gp as gp
    from pyro.nn import PyroParam
    from torch.distributions import constraints

    if not noise_floor > 0:
        raise ValueError(f"fit_sparse_gp: noise_floor must be positive, got {noise_floor!r}")
    if not is_positive_int(num_inducing):
        raise ValueError(f"fit_sparse_gp: num_inducing must be a positive int, got {num_inducing!r}")
    check_regression_data("fit_sparse_gp", x, y)
    x, y = x.double(), y.double()
    pyro.clear_param_store()
    g = torch.Generator().manual_seed(check_seed(seed, "fit_sparse_gp"))
    inducing = x[torch.randperm(len(x), generator=g)[:num_inducing]].clone()
    kernel = gp.kernels.RBF(input_dim=x.shape[1], lengthscale=torch.ones(x.shape[1], dtype=x.dtype))
    model = gp.models.SparseGPRegression(x, y, kernel, Xu=inducing, approx="VFE", jitter=1e-6)
    # the noise variance starts at 0.1, as before, under a constraint that keeps it above the floor
    model.noise = PyroParam(torch.tensor(0.1, dtype=x.dtype), constraints.greater_than(noise_floor))
    model = model.to(x.device)  # the kernel's and the noise's parameters where the data are
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    gp.util.train(model, optimizer, pyro.infer.Trace_ELBO().differentiable_loss, num_steps=steps)
    return model
