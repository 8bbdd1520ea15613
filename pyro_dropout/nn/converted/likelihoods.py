r"""The likelihood of a converted network's outputs ``f`` ``[*draws, N, outputs]``.

* ``"normal"``: one output, :math:`y \sim \mathcal N(f(x), \tau^{-1})` with a fixed precision.
* ``"heteroscedastic"``: two outputs, a mean and a log-variance (the convention of
  :class:`~pyro_dropout.nn.MLP` and of Kendall & Gal 2017),
  :math:`y \sim \mathcal N(f_0(x), \exp f_1(x))`.
* ``"categorical"``: two or more outputs, the logits of the classes: ``[N, C]``, or ``[N, *positions,
  C]`` (a class per token or time step, the classes last), observed as ``y`` ``[N, *positions]``.
* ``"segmentation"``: logits ``[N, C, *space]`` (a class per pixel, the classes on dim 1, as
  torchvision's segmentation networks give them), observed as ``y`` ``[N, *space]``; recorded as
  ``"logits"`` with the classes last, ``[N, *space, C]``.
* a callable ``f -> distribution``: anything else (a log-sd head:
  ``lambda f: dist.Normal(f[..., 0], f[..., 1].exp())``); the distribution's batch shape must end
  with the ``N`` points (the data plate).

The outputs are recorded as deterministic sites (``"mean"``, ``"log_var"``, ``"logits"``, or
``"output"`` for a callable) and the data as ``"obs"``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyro
import pyro.distributions as dist
import torch

from ...distributions import Categorical

__all__ = ["LIKELIHOODS", "check_likelihood", "check_outputs", "check_targets", "observe"]

LIKELIHOODS = ("normal", "heteroscedastic", "categorical", "segmentation")
_OUTPUTS = {
    "normal": "exactly 1",
    "heteroscedastic": "exactly 2 (mean, log-variance)",
    "categorical": "2 or more",
    "segmentation": "2 or more classes on dim 1",
}
_CLASSES = ("categorical", "segmentation")


def check_likelihood(likelihood: Any) -> None:
    if callable(likelihood) or likelihood in LIKELIHOODS:
        return
    raise ValueError(
        f"from_module: likelihood must be one of {', '.join(map(repr, LIKELIHOODS))} or a callable "
        f"f -> distribution, got {likelihood!r}"
    )


def check_outputs(likelihood: Any, outputs: int, where: str) -> None:
    """Refuse a network whose number of outputs does not fit its likelihood."""
    if callable(likelihood):
        return
    fits = (
        outputs >= 2 if likelihood in _CLASSES else outputs == {"normal": 1, "heteroscedastic": 2}[likelihood]
    )
    if not fits:
        hint = " (a mean and a log-variance: likelihood='heteroscedastic')" if outputs == 2 else ""
        raise ValueError(
            f"from_module: {where} has {outputs} output(s), but likelihood={likelihood!r} needs "
            f"{_OUTPUTS[likelihood]}{hint}; for another head give a callable f -> distribution"
        )


def check_targets(likelihood: Any, y: torch.Tensor | None, n: int) -> None:
    """A clear error for targets shaped unlike the likelihood's points, or class labels that are not
    whole numbers (the classes of positions are checked against the outputs, in :func:`observe`)."""
    if y is None or callable(likelihood):
        return
    if (
        likelihood in _CLASSES
        and (y.is_floating_point() or y.is_complex())
        and not bool((y == y.round()).all())
    ):
        found = y[y != y.round()].flatten()[0].item()
        raise ValueError(
            f"y: the {likelihood} likelihood's labels must be class indices (whole numbers), found {found}"
        )
    if likelihood in _CLASSES and y.dim() > 1 and len(y) == n:
        return
    if y.dim() == 2 and y.shape == (n, 1):
        raise ValueError(
            f"y has shape ({n}, 1); the {likelihood} likelihood expects ({n},): pass y.squeeze(-1)"
        )
    if y.shape != (n,):
        raise ValueError(f"y has shape {tuple(y.shape)}; the {likelihood} likelihood expects ({n},)")


def observe(
    likelihood: str | Callable,
    f: torch.Tensor,
    y: torch.Tensor | None,
    tau: float | torch.Tensor,
    event_dim: int,
) -> torch.Tensor:
    """The likelihood's sample site ``"obs"`` for outputs ``f`` ``[*draws, N, *row]`` (inside the
    data plate at dim -1; ``event_dim``: the dims of one row's output)."""
    if callable(likelihood):
        pyro.deterministic("output", f, event_dim=event_dim)
        return pyro.sample("obs", likelihood(f), obs=y)
    if likelihood in _CLASSES and event_dim >= 2:
        return _observe_positions(likelihood, f, y, event_dim)
    if event_dim != 1 or likelihood == "segmentation":
        raise ValueError(
            f"from_module: the network returned rows of shape {tuple(f.shape[f.dim() - event_dim :])}; "
            f"the {likelihood} likelihood expects "
            + ("[N, classes, *space]" if likelihood == "segmentation" else "[N, outputs]")
            + ("; one point given without its batch dimension? pass x.unsqueeze(0)" if event_dim == 0 else "")
        )
    check_outputs(likelihood, f.shape[-1], "the network")
    if likelihood == "categorical":
        logits = pyro.deterministic("logits", f, event_dim=1)
        return pyro.sample("obs", Categorical(logits=logits), obs=y)
    mean = pyro.deterministic("mean", f[..., 0], event_dim=0)
    if likelihood == "heteroscedastic":
        log_var = pyro.deterministic("log_var", f[..., 1], event_dim=0)
        return pyro.sample("obs", dist.Normal(mean, torch.exp(0.5 * log_var)), obs=y)
    return pyro.sample("obs", dist.Normal(mean, tau**-0.5), obs=y)


def _observe_positions(
    likelihood: str, f: torch.Tensor, y: torch.Tensor | None, event_dim: int
) -> torch.Tensor:
    """A class at every position of a row: tokens ``[N, T, C]`` or pixels ``[N, C, *space]``."""
    logits = f.movedim(-event_dim, -1) if likelihood == "segmentation" else f
    check_outputs(likelihood, logits.shape[-1], "the network")
    positions = tuple(logits.shape[logits.dim() - event_dim : -1])
    if y is not None and tuple(y.shape[1:]) != positions:
        raise ValueError(
            f"y has shape {tuple(y.shape)}; the network gives a class at each of {positions} positions per "
            f"row, so the {likelihood} likelihood expects ({y.shape[0]}, {', '.join(map(str, positions))})"
        )
    logits = pyro.deterministic("logits", logits, event_dim=event_dim)
    return pyro.sample("obs", Categorical(logits=logits).to_event(event_dim - 1), obs=y)
