"""Per-example masks in the losses: the guide's masked weights at their means, and the model
replayed with each masked where it is used (:mod:`pyro_dropout.nn.masking`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeGuard, cast

import torch
from pyro import poutine
from pyro.poutine.messenger import Messenger
from pyro.poutine.trace_struct import Trace

from ..distributions import MaskedWeight, NetworkDropout
from ..nn import masking

__all__ = ["MeanWeights", "per_example_weight", "replay_per_example"]


def per_example_weight(q: Any) -> TypeGuard[MaskedWeight]:
    """A masked weight over input units: masked per example where the model uses it (not one whose
    masks a converted network's own dropout draws, per element already)."""
    return (
        isinstance(q, MaskedWeight)
        and not isinstance(q, NetworkDropout)
        and q.event_dim >= 2
        and not q.is_point_mass
    )


class MeanWeights(Messenger):
    """The guide's masked weights take their mean, not a draw: with per-example masks their masks
    are drawn where the model uses them, and a per-draw mask drawn here would go unused."""

    def _pyro_sample(self, msg: Any) -> None:
        if msg["value"] is None and not msg["is_observed"] and per_example_weight(msg["fn"]):
            msg["value"] = msg["fn"].mean


def replay_per_example(model: Callable, guide_trace: Trace, args: tuple, kwargs: dict) -> Trace:
    """Replay the model with every masked weight at its mean, masked per example where used."""
    weights: dict[str, tuple[MaskedWeight, torch.Tensor]] = {}
    for name, site in guide_trace.nodes.items():
        q = site.get("fn")
        if site["type"] == "sample" and per_example_weight(q):
            mean = q.loc.expand(cast(torch.Tensor, site["value"]).shape)
            site["value"] = mean
            weights[name] = (q, mean)
    with masking.per_example_masks(weights) as registry:
        model_trace = poutine.trace(poutine.replay(model, trace=guide_trace)).get_trace(*args, **kwargs)
    unused = sorted(m.name for m in registry.values() if m.uses == 0)
    if unused:
        raise ValueError(
            f"per-example masks: the weight site(s) {unused} did not enter the model through "
            "pyro_dropout.nn.functional.linear or conv2d (or pyro_dropout.nn.Linear / Conv2d), "
            "so their inputs cannot be masked per example; use those layers, or one mask per "
            "draw (per_example_masks=False)"
        )
    return model_trace
