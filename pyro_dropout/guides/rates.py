"""The drop probabilities a ``DropoutGuide`` is given: one for all, a dict per site, or a callable."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch

from ..distributions import validate_dropout_rate

__all__ = ["DropoutSpec", "Rate", "check_spec", "site_rate"]

Rate = float | torch.Tensor
DropoutSpec = float | torch.Tensor | Mapping[str, Rate] | Callable[[str, Any], Rate]


def check_spec(spec: DropoutSpec, what: str) -> None:
    """Check the rates of a spec that are known before the model runs (a dict's, a number)."""
    if isinstance(spec, Mapping):
        for name, p in spec.items():
            validate_dropout_rate(p, f"DropoutGuide: {what} for site '{name}'")
    elif not callable(spec):
        validate_dropout_rate(spec, f"DropoutGuide: {what}")


def site_rate(spec: DropoutSpec, concrete: bool, name: str, site: dict, matrix: bool) -> Rate:
    """The rate of site ``name`` from a ``dropout`` / ``init_dropout`` spec, checked against the
    site (a tensor must broadcast to its batch shape; a rate must be below 1 in its dtype)."""
    what = "init_dropout" if concrete else "dropout"
    if isinstance(spec, Mapping):
        if name in spec:
            p = spec[name]
        elif matrix:
            raise ValueError(
                f"DropoutGuide: the {what} dict has no rate for the weight site '{name}' "
                "(give 0.0 for no dropout)"
            )
        else:
            return 0.0
    elif not matrix:
        return 0.0
    else:
        p = spec(name, site) if callable(spec) else spec
    validate_dropout_rate(p, f"DropoutGuide: {what} for site '{name}'", site["value"].dtype)
    if not isinstance(p, torch.Tensor):
        return float(p)
    batch = site["fn"].batch_shape
    try:
        fits = torch.broadcast_shapes(p.shape, batch) == batch
    except RuntimeError:
        fits = False
    if not fits:
        raise ValueError(
            f"DropoutGuide: the {what} tensor for site '{name}' has shape {tuple(p.shape)}; it must "
            f"broadcast to the site's batch shape {tuple(batch)}"
        )
    if concrete and not bool((p > 0).all()):
        raise ValueError(f"DropoutGuide: learned rates for site '{name}' must start above 0")
    return p.detach().clone()
