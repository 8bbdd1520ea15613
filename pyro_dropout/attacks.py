r"""Gradient-sign attacks on the MC-dropout predictive of any classifier ``model`` + ``guide``.

The attacked quantity is the log of the *predictive* class probabilities, the mean over
``num_samples`` draws of the weights (one mask per draw, shared by the images):

$$
\log \bar p(y \mid x) = \log \frac{1}{T} \sum_{t=1}^{T} p(y \mid x, \omega_t),
\qquad \omega_t \sim q,
$$

differentiated in :math:`x` through the averaged probabilities (fresh draws at every call).
``num_samples=1`` attacks a single stochastic forward pass instead; a network without dropout
gives the same answer for any ``num_samples``.

* :func:`fgs`: the fast gradient sign step (Goodfellow et al., 2015). Untargeted, it lowers the
  predicted class's probability, :math:`x - \eta\,\mathrm{sgn}\nabla_x \max_y \log \bar p(y\mid x)`;
  with ``target`` it raises the target's, :math:`x + \eta\,\mathrm{sgn}\nabla_x \log \bar p(t\mid x)`.
* :func:`iterative_fgs`: the targeted step repeated (paper 003 §5.3), yielding every iterate.

Usage:

    x_adv = fgs(model, guide, x_test, eta=0.1, num_samples=10)
    for step, x_t in enumerate(iterative_fgs(model, guide, x, target=0, eta=0.01, steps=40), 1):
        ...
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

import pyro
import pyro.distributions as dist
import torch
from pyro import poutine

from .infer.input_checks import has_non_finite
from .ops import is_positive_int
from .prediction.collect import DRAWS_PLATE, plate_nesting

__all__ = ["fgs", "iterative_fgs", "predictive_log_probs"]

Bounds = tuple[float, float] | None


def _check_images(x: object, what: str) -> torch.Tensor:
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise TypeError(
            f"{what}: x must be a floating-point tensor of inputs [N, ...], got {type(x).__name__}"
        )
    if x.dim() < 1 or len(x) == 0:
        raise ValueError(f"{what}: x must hold at least one input along its first dim, got {tuple(x.shape)}")
    if has_non_finite(x):
        raise ValueError(f"{what}: x holds NaN or infinite values")
    return x


def _count(value: object, name: str, what: str) -> int:
    if not is_positive_int(value):
        raise ValueError(f"{what}: {name} must be a positive int, got {value!r}")
    return value


def _categorical(trace: Any, site: str) -> dist.Categorical:
    node = trace.nodes.get(site)
    if node is None or node["type"] != "sample":
        names = [n for n, s in trace.nodes.items() if s["type"] == "sample"]
        raise ValueError(f"site '{site}' is not a sample site of the model (its sites: {names})")
    fn = node["fn"]
    while not isinstance(fn, dist.Categorical) and hasattr(fn, "base_dist"):
        fn = fn.base_dist
    if not isinstance(fn, dist.Categorical):
        raise ValueError(f"site '{site}' is a {type(node['fn']).__name__}, not a categorical likelihood")
    return fn


def predictive_log_probs(
    model: Callable, guide: Callable, x: torch.Tensor, *, num_samples: int = 10, site: str = "obs"
) -> torch.Tensor:
    r"""``[N, C]``: :math:`\log \bar p(c \mid x_n)`, the log of the mean over ``num_samples``
    draws of the class probabilities at the categorical ``site``, differentiable in ``x``.

    ``model(x)`` must take the inputs as its first argument and observe one categorical
    likelihood per row of ``x`` (as :class:`~pyro_dropout.nn.MLP` and
    :class:`~pyro_dropout.nn.LeNet` do)."""
    x = _check_images(x, "predictive_log_probs")
    draws = _count(num_samples, "num_samples", "predictive_log_probs")
    with poutine.block():
        first = poutine.trace(guide).get_trace(x.detach())
        nesting = plate_nesting(poutine.trace(poutine.replay(model, trace=first)).get_trace(x.detach()))
        with pyro.plate(DRAWS_PLATE, draws, dim=-(nesting + 1)):
            latents = poutine.trace(guide).get_trace(x)
            trace = poutine.trace(poutine.replay(model, trace=latents)).get_trace(x)
    logits = _categorical(trace, site).logits
    n, classes = len(x), logits.shape[-1]
    if (
        logits.numel() % (n * classes)
        or logits.shape[-2] != n
        or logits.numel() // (n * classes) not in (1, draws)
    ):
        raise ValueError(
            f"site '{site}': expected logits [draws, {n}, classes] for {n} inputs, got {tuple(logits.shape)}"
        )
    log_p = logits.reshape(-1, n, classes).log_softmax(-1)
    return log_p.logsumexp(0) - math.log(len(log_p))


def _target(target: int | torch.Tensor | None, n: int, classes: int) -> torch.Tensor | None:
    if target is None:
        return None
    if isinstance(target, bool) or not isinstance(target, int | torch.Tensor):
        raise TypeError(f"fgs: target must be a class index or a tensor of them, got {target!r}")
    t = torch.as_tensor(target)
    if t.is_floating_point() or t.dtype == torch.bool:
        raise TypeError(f"fgs: target must be a class index or a tensor of them, got {target!r}")
    t = t.long().expand(n) if t.dim() == 0 else t.long()
    if t.shape != (n,) or bool(((t < 0) | (t >= classes)).any()):
        raise ValueError(
            f"fgs: target must be a class in [0, {classes}) or one per input ({n}), got {target!r}"
        )
    return t


def _check_bounds(bounds: object, x: torch.Tensor) -> None:
    """``bounds`` is ``None`` or ``(low, high)``, finite, ``low < high``, and holds ``x``: an input
    outside it would be clipped into it by the first step, whatever ``eta``."""
    if bounds is None:
        return
    pair: tuple = tuple(bounds) if isinstance(bounds, tuple | list) else ()
    numbers = len(pair) == 2 and all(isinstance(b, int | float) and not isinstance(b, bool) for b in pair)
    if not (numbers and math.isfinite(pair[0]) and math.isfinite(pair[1]) and pair[0] < pair[1]):
        raise ValueError(f"fgs: bounds must be (low, high) with low < high, or None; got {bounds!r}")
    low, high = float(x.min()), float(x.max())
    if low < pair[0] or high > pair[1]:
        raise ValueError(
            f"fgs: x lies in [{low:.3g}, {high:.3g}], outside bounds {pair}: give the inputs' valid "
            "range as bounds (or bounds=None); the step would otherwise clip them into it"
        )


def fgs(
    model: Callable,
    guide: Callable,
    x: torch.Tensor,
    *,
    eta: float,
    target: int | torch.Tensor | None = None,
    num_samples: int = 10,
    site: str = "obs",
    bounds: Bounds = (0.0, 1.0),
) -> torch.Tensor:
    r"""One fast-gradient-sign step of size ``eta`` on every input (see the module's docs).

    :param target: ``None``: untargeted (away from the predicted class); a class, or one per
        input: toward it.
    :param bounds: the valid range the result is clipped to (``None``: no clipping).
    :returns: the perturbed inputs, detached, shaped as ``x``.
    """
    x = _check_images(x, "fgs")
    if isinstance(eta, bool) or not (isinstance(eta, int | float) and math.isfinite(eta) and eta >= 0):
        raise ValueError(f"fgs: eta must be a finite number >= 0, got {eta!r}")
    _check_bounds(bounds, x)
    inputs = x.detach().clone().requires_grad_(True)
    with torch.enable_grad():
        log_p = predictive_log_probs(model, guide, inputs, num_samples=num_samples, site=site)
        t = _target(target, len(x), log_p.shape[-1])
        chosen = log_p.max(-1).values if t is None else log_p.gather(-1, t[:, None].to(log_p.device))
        (grad,) = torch.autograd.grad(chosen.sum(), inputs)
    step = eta * grad.sign()
    out = x.detach() + (step if t is not None else -step)
    return out if bounds is None else out.clamp(*bounds)


def iterative_fgs(
    model: Callable,
    guide: Callable,
    x: torch.Tensor,
    *,
    target: int | torch.Tensor,
    eta: float = 0.01,
    steps: int = 40,
    num_samples: int = 10,
    site: str = "obs",
    bounds: Bounds = (0.0, 1.0),
) -> Iterator[torch.Tensor]:
    r"""The targeted iterative attack :math:`x_t = x_{t-1} + \eta\,\mathrm{sgn}\nabla_x \log
    \bar p(\mathrm{target} \mid x_{t-1})`, clipped to ``bounds``: yields :math:`x_1, \dots, x_{steps}`."""
    _count(steps, "steps", "iterative_fgs")
    current = x
    for _ in range(steps):
        current = fgs(
            model, guide, current, eta=eta, target=target, num_samples=num_samples, site=site, bounds=bounds
        )
        yield current
