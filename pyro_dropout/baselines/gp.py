r"""Exact Gaussian-process regression with a squared-exponential kernel (``pyro.contrib.gp``):
paper 000's reference for the one-dimensional figures."""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["check_regression_data", "fit_gp", "gp_predictive"]


def check_regression_data(where: str, x: torch.Tensor, y: torch.Tensor) -> None:
    """A clear error unless ``x`` is ``[n, d]`` and ``y`` ``[n]``, both finite."""
    if not (isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor)):
        raise TypeError(f"{where}: x and y must be tensors, got {type(x).__name__} and {type(y).__name__}")
    if x.dim() != 2 or y.dim() != 1 or len(x) != len(y):
        hint = "; pass y.squeeze(-1)" if y.dim() == 2 and y.shape[-1] == 1 else ""
        raise ValueError(
            f"{where}: x must be [n, d] and y [n], got {tuple(x.shape)} and {tuple(y.shape)}{hint}"
        )
    if not (torch.isfinite(x).all() and torch.isfinite(y).all()):
        raise ValueError(f"{where}: x and y must be finite")


def fit_gp(
    x: torch.Tensor, y: torch.Tensor, steps: int = 1000, lr: float = 0.05, noise_floor: float = 1e-6
) -> Any:
    r"""Fit a GP with a squared-exponential kernel to ``x`` ``[n, d]``, ``y`` ``[n]`` (standardised):
    the length-scale, the signal and the noise variance by type-II maximum likelihood (Adam on the
    exact log marginal likelihood, ``steps`` steps), in float64. The noise variance starts at 0.1
    and is kept above ``noise_floor``. Returns the ``GPRegression``; see :func:`gp_predictive`."""
    import pyro
    import pyro.contrib.gp as gp
    from pyro.nn import PyroParam
    from torch.distributions import constraints

    check_regression_data("fit_gp", x, y)
    x, y = x.double(), y.double()
    pyro.clear_param_store()
    kernel = gp.kernels.RBF(input_dim=x.shape[1])
    model = gp.models.GPRegression(x, y, kernel, jitter=1e-6)
    model.noise = PyroParam(torch.tensor(0.1, dtype=x.dtype), constraints.greater_than(noise_floor))
    model = model.to(x.device)  # the kernel's and the noise's parameters where the data are
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    gp.util.train(model, optimizer, pyro.infer.Trace_ELBO().differentiable_loss, num_steps=steps)
    return model


def gp_predictive(model: Any, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The GP's predictive mean and standard deviation (observation noise included) at ``x`` ``[m, d]``."""
    with torch.no_grad():
        mean, var = model(x.double(), full_cov=False, noiseless=False)
    return mean, var.clamp_min(0).sqrt()
