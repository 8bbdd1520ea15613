r"""Hamiltonian Monte Carlo (NUTS, Hoffman & Gelman 2014) on the same Bayesian network."""

from __future__ import annotations

from typing import Any

import torch

from ..ops import check_seed

__all__ = ["run_nuts"]


def run_nuts(
    model: Any,
    x: torch.Tensor,
    y: torch.Tensor,
    warmup: int = 500,
    samples: int = 500,
    max_tree_depth: int = 8,
    seed: int = 0,
) -> dict[str, torch.Tensor]:
    """Posterior samples ``{site: [samples, ...]}`` of ``model(x, y)`` by NUTS (jit-compiled, one chain)."""
    import pyro
    from pyro.infer import MCMC, NUTS

    pyro.clear_param_store()
    pyro.set_rng_seed(check_seed(seed, "run_nuts"))
    kernel = NUTS(model, jit_compile=True, ignore_jit_warnings=True, max_tree_depth=max_tree_depth)
    mcmc = MCMC(kernel, num_samples=samples, warmup_steps=warmup, disable_progbar=True)
    mcmc.run(x, y)
    return mcmc.get_samples()
