r"""The batching self-check: before batched draws are trusted, one batched pass of two draws is
compared with the unbatched pass of the same draw.

A model's code is written for one set of weights. Under a plate of draws its tensors gain a
leading draw dim, and code that indexes axes by number (``log_softmax(dim=1)``, ``x.shape[0]``)
or broadcasts a draw against another silently computes something else. Once per model and input
shape, :func:`batching_mismatch` runs the model on one posterior draw twice over, batched in a
plate of two draws, and compares every deterministic site and the parameters of every sample
site with the unbatched pass that set up the prediction (:func:`~.engine.prepare`). Where they
differ, prediction runs one draw at a time (``parallel=False``) and warns once, naming the site
and the largest difference. It costs one pass of the model on two draws, once; the random state
is left as it was, so the draws are those of an unchecked run.
"""

from __future__ import annotations

import warnings
import weakref
from typing import Any

import pyro
import torch
from pyro import poutine
from pyro.poutine.trace_struct import Trace
from pyro.poutine.util import site_is_subsample
from pyro.util import get_rng_state, set_rng_state

from .chunks import ChunkRunner
from .collect import DRAWS_PLATE

__all__ = ["batched_is_exact", "batching_mismatch"]

_VERDICTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> {signature: exact}


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


def _latents(prototype: Trace, names: frozenset) -> dict[str, tuple[Any, int]]:
    sites: dict[str, Any] = {name: prototype.nodes[name] for name in names if name in prototype.nodes}
    return {
        name: (site["value"], len(site["fn"].batch_shape))
        for name, site in sites.items()
        if not site_is_subsample(site)
    }


def batching_mismatch(runner: ChunkRunner) -> tuple[str, float] | None:
    """``(site, largest difference)`` where the model batched over two copies of the prototype's
    posterior draw differs from the prototype (its unbatched pass); ``None`` where all agree."""
    model, prototype, nesting = runner.model, runner.prototype, runner.nesting
    args, kwargs = runner.args, runner.kwargs
    data = {  # two copies, not an expansion (which the layers compute once: functional.unexpand)
        name: torch.stack([value, value.clone()]).reshape((2,) + (1,) * (nesting - batch) + value.shape)
        for name, (value, batch) in _latents(prototype, runner.latents).items()
    }
    state = get_rng_state()
    try:
        with torch.no_grad(), poutine.block(), pyro.validation_enabled(False):
            with pyro.plate(DRAWS_PLATE, 2, dim=-(nesting + 1)):
                batched = poutine.trace(poutine.condition(model, data=data)).get_trace(*args, **kwargs)
    except Exception as error:  # a model that cannot take batched draws at all
        return f"(the batched pass failed: {type(error).__name__}: {error})", float("inf")
    finally:
        set_rng_state(state)
    for name, site in prototype.nodes.items():
        if site["type"] != "sample" or site_is_subsample(site) or name in data or name not in batched.nodes:
            continue
        mine, theirs = _compared(site), _compared(batched.nodes[name])
        for key, single in mine.items():
            other = theirs.get(key)
            if other is None or other.numel() != 2 * single.numel():
                return (
                    f"{name} ({key}: shape {tuple(single.shape)} unbatched, "
                    f"{tuple(getattr(other, 'shape', ()))} for two draws)",
                    float("inf"),
                )
            gap = float((other.reshape(2, -1) - single.reshape(1, -1)).abs().max()) if single.numel() else 0.0
            if not gap <= 1e-5 * max(1.0, float(single.abs().max())):
                return f"{name} ({key})", gap
    return None


def _signature(args: tuple, kwargs: dict) -> tuple:
    values = (*args, *sorted(kwargs.items()))
    return tuple(
        (tuple(v.shape), v.dtype) if isinstance(v, torch.Tensor) else type(v).__name__ for v in values
    )


def batched_is_exact(runner: ChunkRunner) -> bool:
    """Whether batched draws of the runner's model may be trusted for inputs like its arguments
    (checked once per model and input shape; a model that checks itself,
    ``checks_its_batching``, is trusted)."""
    model = runner.model
    if getattr(model, "checks_its_batching", False):
        return True
    try:
        verdicts = _VERDICTS.setdefault(model, {})
    except TypeError:  # not weakly referable: check every time
        verdicts = {}
    key = _signature(runner.args, runner.kwargs)
    if key not in verdicts:
        found = batching_mismatch(runner)
        verdicts[key] = found is None
        if found is not None:
            warnings.warn(
                f"predict: the model's batched draws do not match one draw at a time at site {found[0]} "
                f"(largest difference {found[1]:.3g}); its code is written for one set of weights "
                f"(an axis counted from the left, dim=1 or x.shape[0], meets a leading draw dim). Its draws "
                f"run one at a time from now on (parallel=False): exact, slower",
                stacklevel=4,
            )
    return verdicts[key]
