"""Checks of a likelihood site's shapes, each naming the fix: targets shaped unlike the points, a
likelihood in no data plate, a weight that kept its plate slot, one observation for a whole plate."""

from __future__ import annotations

import math
from typing import Any, cast

from pyro.util import check_site_shape

__all__ = ["PARTICLE_PLATE", "check_likelihood_site", "check_targets"]

PARTICLE_PLATE = "num_particles_vectorized"  # the name Pyro gives its particle plate
Site = Any


def _data_plates(site: Site) -> list:
    return [f for f in site["cond_indep_stack"] if f.vectorized and f.name != PARTICLE_PLATE and f.size > 1]


def check_targets(name: str, site: Site) -> None:
    """Targets ``[N, 1]`` for a likelihood of ``N`` points (one per row of a plate): broadcast, they
    would pair every target with every point."""
    value, fn = site["value"], site["fn"]
    batch = tuple(fn.batch_shape)
    points = [f.size for f in _data_plates(site)]
    if (
        fn.event_dim == 0
        and value.dim() >= 2
        and value.shape[-1] == 1
        and points
        and batch[-1:] == (points[-1],)
    ):
        n = value.shape[-2]
        raise ValueError(
            f"at site '{name}': y has shape {tuple(value.shape)}; the likelihood expects ({n},), one value "
            f"per point: pass y.squeeze(-1)"
        )


def check_likelihood_site(name: str, site: Site, max_plate_nesting: float) -> None:
    log_prob = site["log_prob"]
    if math.isfinite(max_plate_nesting) and log_prob.dim() > max_plate_nesting and not _data_plates(site):
        raise ValueError(
            f"at site '{name}', log_prob has shape "
            f"{tuple(log_prob.shape)}: the model has no data plate around "
            'its likelihood; write `with pyro.plate("data", len(x)): pyro.sample(...)`, '
            "or declare the points one event with .to_event(1)"
        )
    if math.isfinite(max_plate_nesting) and log_prob.dim() > max_plate_nesting:
        raise ValueError(
            f"at site '{name}', log_prob has shape {tuple(log_prob.shape)}: more batch dims "
            f"than the {int(max_plate_nesting)} plates (particles included). A weight sampled "
            "outside the data plate probably kept its plate slot and broadcast against the data; use "
            "pyro_dropout.nn.Linear, or pyro_dropout.nn.functional.linear (x @ W.T) or matmul "
            "(x @ W, for W stored [in, out]), which drop it; or vectorize_particles=False"
        )
    check_site_shape(site, cast(int, max_plate_nesting))  # Pyro's check also takes inf
    _check_observation_fills_its_plates(name, site)


def _check_observation_fills_its_plates(name: str, site: Site) -> None:
    """An observed value with size 1 in a data plate's dim would be broadcast over every point
    of the plate: one target for all the data, silently (a ``y`` of length 1, say)."""
    value, event_dim = site["value"], site["fn"].event_dim
    for frame in site["cond_indep_stack"]:
        if not frame.vectorized or frame.dim is None or frame.size <= 1 or frame.name == PARTICLE_PLATE:
            continue
        dim = frame.dim - event_dim
        if value.dim() >= -dim and value.shape[dim] == 1:
            raise ValueError(
                f"at site '{name}', the observed value has shape {tuple(value.shape)}: size 1 where the "
                f"plate '{frame.name}' has {frame.size} elements, so one value would stand for all of "
                "them; give one observation per element (e.g. y of the same length as x)"
            )
