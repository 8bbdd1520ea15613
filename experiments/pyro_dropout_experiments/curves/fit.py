r"""Fitting a one-dimensional curve: ``R`` dropout networks on the same rows (one run each, trained
together as ``MLP(runs=R)``), their predictive on a grid, and the GP beside them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import pyro
import torch

from pyro_dropout.baselines import fit_gp, gp_predictive
from pyro_dropout.guides import DropoutGuide, init_sites_to
from pyro_dropout.infer import CompiledSVI, DropoutELBO
from pyro_dropout.nn import MLP
from pyro_dropout.prediction import predict, predict_standard

from ..core.training import Standardiser, train_runs
from .settings import CurveSettings

__all__ = ["Fitted", "Predictive", "fit_curves", "gp_curve", "mc_predictive", "standard_predictive"]


@dataclass
class Fitted:
    """``R`` trained networks (one per rate), and the training rows' statistics."""

    model: MLP
    guide: DropoutGuide
    stats: Standardiser
    rates: tuple[float, ...]


@dataclass
class Predictive:
    """Draws of ``R`` networks at ``m`` inputs on the original scale: the network's outputs
    ``means`` ``[T, R, m]`` and the noise variances ``noise`` ``[T, R, m]`` of each draw."""

    means: torch.Tensor
    noise: torch.Tensor

    @property
    def mean(self) -> torch.Tensor:
        return self.means.mean(0)

    @property
    def epistemic_variance(self) -> torch.Tensor:
        """The variance of the draws' outputs, ``[R, m]``."""
        return self.means.var(0, unbiased=False)

    @property
    def aleatoric_variance(self) -> torch.Tensor:
        """The mean noise variance of the draws, ``[R, m]``."""
        return self.noise.mean(0)

    @property
    def epistemic(self) -> torch.Tensor:
        """The spread of the draws (standard deviation), ``[R, m]``."""
        return self.epistemic_variance.sqrt()

    @property
    def aleatoric(self) -> torch.Tensor:
        return self.aleatoric_variance.sqrt()

    @property
    def sd(self) -> torch.Tensor:
        """The predictive standard deviation: the draws' spread and the noise together."""
        return (self.epistemic_variance + self.aleatoric_variance).sqrt()


def _rows(x: np.ndarray, y: np.ndarray, runs: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """``x`` ``[n]``, ``[n, d]`` (the same rows for every run) or ``[R, n, d]`` (each run its own),
    ``y`` ``[n]`` or ``[R, n]``, as tensors ``[R, n, d]`` and ``[R, n]``."""
    dtype = torch.get_default_dtype()
    xs = torch.as_tensor(np.asarray(x, dtype=np.float64), dtype=dtype, device=device)
    ys = torch.as_tensor(np.asarray(y, dtype=np.float64), dtype=dtype, device=device)
    if xs.dim() < 3:
        xs, ys = xs.reshape(1, len(xs), -1), ys.reshape(1, -1)
    if ys.shape != xs.shape[:2] or len(xs) not in (1, runs):
        raise ValueError(f"curves: x {tuple(x.shape)} and y {tuple(y.shape)} do not make {runs} runs of rows")
    return xs.expand(runs, *xs.shape[1:]).contiguous(), ys.expand(runs, ys.shape[1]).contiguous()


def fit_curves(
    x: np.ndarray,
    y: np.ndarray,
    rates: Sequence[float],
    s: CurveSettings,
    *,
    activation: str = "relu",
    concrete: bool = False,
    batch_size: int | None = None,
    progress: bool = True,
    desc: str = "training",
) -> Fitted:
    """Train one network per entry of ``rates`` on ``x`` ``[n]`` or ``[n, d]``, ``y`` ``[n]``, or
    each on its own rows (``[R, n, d]``, ``[R, n]``); standardised inside.

    ``s.layers`` hidden layers of ``s.width`` units, dropout ``p`` on every layer's inputs except
    the network's own (a single input dropped would make a fraction p of the draws constant
    functions). With ``concrete`` the rates are the starting ``p``, learned per layer, and the
    network is heteroscedastic (paper 001 §4.1: a mean and a log-variance per point); otherwise
    the noise precision is learned by MAP under the library's Gamma prior, from 1.
    ``batch_size``: default all the rows (full-batch steps)."""
    device = torch.device(s.device)
    xs, ys = _rows(x, y, len(rates), device)
    stats = Standardiser.fit(xs, ys)
    pyro.clear_param_store()
    pyro.set_rng_seed(s.seed)
    model, guide = _network(xs.shape[-1], rates, s, activation, concrete, device)
    svi = CompiledSVI(model, guide, cast(Any, pyro.optim).Adam({"lr": s.lr}), DropoutELBO())
    batch = min(batch_size or xs.shape[1], xs.shape[1])
    epochs = max(1, round(s.steps / -(-xs.shape[1] // batch)))
    train_runs(svi.step, stats.x(xs), stats.y(ys), epochs, batch, s.seed, desc, progress)
    return Fitted(model, guide, stats, tuple(float(r) for r in rates))


def _network(
    inputs: int,
    rates: Sequence[float],
    s: CurveSettings,
    activation: str,
    concrete: bool,
    device: torch.device,
) -> tuple[MLP, DropoutGuide]:
    runs = len(rates)
    model = MLP(
        inputs,
        hidden=(s.width,) * s.layers,
        runs=runs,
        activation=activation,
        likelihood="heteroscedastic" if concrete else "normal",
        tau="learned",
        length_scale=s.length_scale,
    ).to(device)
    p = torch.tensor(list(rates), dtype=torch.get_default_dtype(), device=device).reshape(runs, 1)
    spec: dict[str, float | torch.Tensor] = {
        "hidden.0.weight": 0.0,
        **{f"hidden.{i}.weight": p for i in range(1, s.layers)},
        "output.weight": p,
    }
    init = init_sites_to({"tau": 1.0})  # the noise as wide as the standardised targets, to start
    if concrete:
        return model, DropoutGuide(model, concrete=True, init_dropout=spec, init_loc_fn=init)
    return model, DropoutGuide(model, dropout=spec, init_loc_fn=init)


def _grid(fitted: Fitted, x: np.ndarray) -> torch.Tensor:
    dev = fitted.stats.y_std.device
    xs, _ = _rows(x, np.zeros(len(x)), len(fitted.rates), dev)
    return fitted.stats.x(xs)


def _original(fitted: Fitted, means: torch.Tensor, noise: torch.Tensor) -> Predictive:
    scale, shift = fitted.stats.y_std.unsqueeze(-1), fitted.stats.y_mean.unsqueeze(-1)
    return Predictive((means * scale + shift).cpu(), (noise * scale.pow(2)).cpu())


def mc_predictive(fitted: Fitted, x: np.ndarray, num_samples: int, chunk_size: int = 100) -> Predictive:
    """MC dropout at ``x``: ``num_samples`` draws of each network."""
    pred = predict(
        fitted.model,
        fitted.guide,
        _grid(fitted, x),
        num_samples=num_samples,
        chunk_size=chunk_size,
        return_sites=(),
    )
    return _original(fitted, pred.means["obs"], pred.variances["obs"])


def standard_predictive(fitted: Fitted, x: np.ndarray) -> Predictive:
    """Standard dropout (weight averaging: the expected weights, one deterministic pass)."""
    pred = predict_standard(fitted.model, fitted.guide, _grid(fitted, x))
    return _original(fitted, pred.means["obs"], pred.variances["obs"])


def gp_curve(x: np.ndarray, y: np.ndarray, x_new: np.ndarray, steps: int) -> Predictive:
    """The GP (squared-exponential kernel) fitted on standardised rows, at ``x_new``: one run, one
    "draw" whose noise is the GP's whole predictive variance."""
    xs, ys = _rows(x, y, 1, torch.device("cpu"))
    stats = Standardiser.fit(xs.double(), ys.double())
    gp = fit_gp(stats.x(xs.double())[0], stats.y(ys.double())[0], steps=steps)
    grid, _ = _rows(x_new, np.zeros(len(x_new)), 1, torch.device("cpu"))
    mean, sd = gp_predictive(gp, stats.x(grid.double())[0])
    scale, shift = float(stats.y_std[0]), float(stats.y_mean[0])
    dtype = torch.get_default_dtype()
    return Predictive(
        (mean * scale + shift).to(dtype).reshape(1, 1, -1), (sd * scale).pow(2).to(dtype).reshape(1, 1, -1)
    )
