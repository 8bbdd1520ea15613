r"""The batching self-check: a model's pass batched over two copies of one draw, compared with its
unbatched pass with that draw.

A model's code is written for one set of weights. Under a plate of draws (vectorised particles,
batched prediction) its tensors gain a leading draw dim, and code that counts axes from the left
(``log_softmax(dim=1)``, ``x.shape[0]``) or broadcasts one draw against another silently
computes something else. :func:`compare_batched` finds that: every deterministic site's value
and every sample site's parameters must be the same, for each copy, as in the unbatched pass.
The random state is left as it was. The losses check their vectorised particles with
:func:`particles_mismatch` (falling back to a loop over particles); prediction checks its
draws (:mod:`pyro_dropout.prediction.batching`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyro
import torch
from pyro import poutine
from pyro.poutine.trace_struct import Trace
from pyro.poutine.util import site_is_subsample
from pyro.util import get_rng_state, set_rng_state

from .likelihood_checks import PARTICLE_PLATE

__all__ = ["compare_batched", "describe_mismatch", "latent_values", "particles_mismatch"]

_FAILED = "the batched pass failed: "  # how compare_batched reports a pass that raised


def _compared(site: Any) -> dict[str, torch.Tensor]:
    """What a site computes: a deterministic site's value, a sample site's parameters."""
    if (site.get("infer") or {}).get("_deterministic"):
        return {"value": site["value"]}
    fn = site["fn"]
    while hasattr(fn, "base_dist"):
        fn = fn.base_dist
    found = {
        k: getattr(fn, k) for k in ("loc", "scale", "logits", "rate", "concentration") if k in fn.__dict__
    }
    if not found and "probs" in fn.__dict__:
        found["probs"] = fn.probs
    return {k: v for k, v in found.items() if isinstance(v, torch.Tensor)}


def latent_values(trace: Trace, names: Any = None) -> dict[str, tuple[torch.Tensor, int]]:
    """``{site: (value, batch dims)}`` of a trace's latent sites (or of the sites ``names``)."""
    sites: dict[str, Any] = {
        name: site
        for name, site in trace.nodes.items()
        if site["type"] == "sample"
        and ((names is None and not site["is_observed"]) or (names is not None and name in names))
    }
    return {n: (s["value"], len(s["fn"].batch_shape)) for n, s in sites.items() if not site_is_subsample(s)}


def compare_batched(
    model: Callable, single: Trace, latents: dict, plate: str, nesting: int, args: tuple, kwargs: dict
) -> tuple[str, float] | None:
    """``(site, largest difference)`` where ``model`` batched in ``plate`` over two copies of the
    ``latents`` differs from ``single`` (its unbatched trace with them); ``None`` where all agree."""
    data = {  # two copies, not an expansion (which the layers compute once: nn.functional.unexpand)
        name: torch.stack([value, value.clone()]).reshape((2,) + (1,) * (nesting - batch) + value.shape)
        for name, (value, batch) in latents.items()
    }
    state = get_rng_state()
    try:
        with torch.no_grad(), poutine.block(), pyro.validation_enabled(False):
            with pyro.plate(plate, 2, dim=-(nesting + 1)):
                batched = poutine.trace(poutine.condition(model, data=data)).get_trace(*args, **kwargs)
    except Exception as error:  # a model that cannot take batched draws at all
        first = (str(error).strip().splitlines() or [""])[0]  # not Pyro's table of trace shapes
        return f"{_FAILED}{type(error).__name__}: {first}", float("inf")
    finally:
        set_rng_state(state)
    for name, site in single.nodes.items():
        if site["type"] != "sample" or site_is_subsample(site) or name in data or name not in batched.nodes:
            continue
        theirs = _compared(batched.nodes[name])
        for key, one in _compared(site).items():
            two = theirs.get(key)
            if two is None or two.numel() != 2 * one.numel():
                shape = tuple(getattr(two, "shape", ()))
                return f"{name} ({key}: shape {tuple(one.shape)} alone, {shape} for two draws)", float("inf")
            gap = float((two.reshape(2, -1) - one.reshape(1, -1)).abs().max()) if one.numel() else 0.0
            if not gap <= 1e-5 * max(1.0, float(one.abs().max())):
                return f"{name} ({key})", gap
    return None


# where the usual causes are, and their batched forms
_HINT = (
    "its code is written for one set of weights: an axis counted from the left (dim=1, "
    "x.shape[0]) meets a leading draw dim, or F.linear / x @ w.T gets a batch of weights, where "
    "pyro_dropout.nn.functional.linear (and matmul, flatten, over_draws) take them (docs/own-model.md)"
)


def describe_mismatch(found: tuple[str, float]) -> str:
    """:func:`compare_batched`'s finding in words, with the usual causes."""
    where, gap = found
    if where.startswith(_FAILED):
        return f"({where}); {_HINT}"
    return f"at site {where} (largest difference {gap:.3g}); {_HINT}"


def particles_mismatch(
    model: Callable, guide: Callable, args: tuple, kwargs: dict, nesting: int
) -> tuple[str, float] | None:
    """:func:`compare_batched` for a loss's vectorised particles: one draw of the guide."""
    state = get_rng_state()
    try:
        with torch.no_grad(), poutine.block(), pyro.validation_enabled(False):
            guide_trace = poutine.trace(guide).get_trace(*args, **kwargs)
            single = poutine.trace(poutine.replay(model, trace=guide_trace)).get_trace(*args, **kwargs)
    finally:
        set_rng_state(state)
    latents = latent_values(guide_trace)
    return compare_batched(model, single, latents, PARTICLE_PLATE, nesting, args, kwargs)
