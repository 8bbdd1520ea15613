r"""The in-between diagnostic: is the epistemic uncertainty larger in the gaps between clusters of
training inputs than on them?

A posterior over functions should be unsure where it has seen no data, also *between* clusters of
data, not only far outside them. Foong et al. (2019, "'In-Between' Uncertainty in Bayesian Neural
Networks") found that mean-field VI and MC dropout often are not, and Foong, Burt, Li & Turner
(2020, "On the Expressiveness of Approximate Inference in Bayesian Neural Networks") prove it for
one-hidden-layer ReLU networks under MC dropout: the predictive variance in the segment between
two points is bounded by the variances at its ends. A Gaussian process with a stationary kernel,
or HMC, widens there.

:func:`in_between` compares the epistemic sd at query points far from every training input but
between them (inside their bounding box) with the sd at query points on the data; on your own
data, :func:`gap_points` makes such queries: midpoints of random pairs of training inputs that lie
far from every training input.

Distances are measured after standardising each feature by the training inputs' sd. A query is
*on the data* within ``near`` of a training input (default: the 90th percentile of the training
inputs' nearest-neighbour distances) and *in a gap* beyond ``gap`` (default: ``4 × near``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..ops import check_seed, is_positive_int, is_positive_number
from ._checks import as_tensor, check_finite

__all__ = ["MAX_GAP_POINTS", "InBetween", "gap_points", "in_between"]

MAX_GAP_POINTS = 1_000_000  # queries gap_points makes at most (it draws 20 pairs of inputs a query)


@dataclass(frozen=True)
class InBetween:
    """The mean epistemic sd on the data and in the gaps, their ratio (above 1: wider in the gaps),
    how many queries each mean is over, and the two distances used."""

    sd_on_data: float
    sd_in_gaps: float
    ratio: float
    on_data: int
    in_gaps: int
    near: float
    gap: float


def _inputs(x: object, what: str) -> torch.Tensor:
    t = check_finite(as_tensor(x, what), what)
    t = t.unsqueeze(-1) if t.dim() == 1 else t
    if t.dim() != 2 or len(t) == 0:
        raise ValueError(f"{what}: expected inputs [N, D] (or [N]) with N >= 1, got shape {tuple(t.shape)}")
    return t.double()


def _standardiser(x_train: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    scale = x_train.std(0) if len(x_train) > 1 else torch.ones(x_train.shape[1], dtype=x_train.dtype)
    return x_train.mean(0), torch.where(scale > 0, scale, torch.ones_like(scale))


def _nearest(a: torch.Tensor, b: torch.Tensor, exclude_self: bool = False) -> torch.Tensor:
    """The distance from each row of ``a`` to its nearest row of ``b`` (in pieces: bounded memory)."""
    out = []
    for i in range(0, len(a), 1024):
        d = torch.cdist(a[i : i + 1024], b)
        if exclude_self:
            d[torch.arange(d.shape[0]), torch.arange(i, i + d.shape[0])] = float("inf")
        out.append(d.min(1).values)
    return torch.cat(out)


@dataclass(frozen=True)
class _Standardised:
    """The training inputs standardised (``z``), the standardiser, and the two distances."""

    z: torch.Tensor
    mean: torch.Tensor
    scale: torch.Tensor
    near: float
    gap: float


def _distances(x_train: object, gap: float | None, near: float | None) -> _Standardised:
    train = _inputs(x_train, "in_between: x_train")
    if len(train) < 2:
        raise ValueError("in_between: x_train needs at least 2 inputs to tell a gap from the data")
    mean, scale = _standardiser(train)
    z = (train - mean) / scale
    if near is None:
        near = float(_nearest(z, z, exclude_self=True).quantile(0.9))
        if not near > 0:
            raise ValueError(
                "in_between: the training inputs' distances to their nearest other input are 0 at the "
                "90th percentile (rows repeated?), so no distance tells the data from a gap: give near="
            )
    gap = 4 * near if gap is None else gap
    for name, value in (("near", near), ("gap", gap)):
        if not is_positive_number(value):
            raise ValueError(f"in_between: {name} must be a positive finite distance, got {value!r}")
    if gap < near:
        raise ValueError(f"in_between: gap ({gap}) must be at least near ({near})")
    return _Standardised(z, mean, scale, float(near), float(gap))


def in_between(
    x_train: object, x: object, sd: object, *, near: float | None = None, gap: float | None = None
) -> InBetween:
    """The epistemic sd ``sd`` ``[M]`` at queries ``x`` ``[M, D]``, averaged on the data and in
    the gaps between the training inputs ``x_train`` ``[N, D]`` (see the module's docs)."""
    train = _distances(x_train, gap, near)
    z_train, near, gap = train.z, train.near, train.gap
    given = _inputs(x, "in_between: x")
    if given.shape[1] != z_train.shape[1]:
        raise ValueError(
            f"in_between: the queries x have {given.shape[1]} columns, the training inputs {z_train.shape[1]}"
        )
    queries = (given - train.mean) / train.scale
    s = check_finite(as_tensor(sd, "in_between: sd"), "in_between: sd").double().reshape(-1)
    if len(s) != len(queries):
        raise ValueError(f"in_between: sd has {len(s)} values for {len(queries)} query points x")
    if bool((s < 0).any()):
        raise ValueError("in_between: sd holds negative values (give standard deviations, not log-sd)")
    d = _nearest(queries, z_train)
    inside = ((queries >= z_train.min(0).values) & (queries <= z_train.max(0).values)).all(1)
    on, between = d <= near, (d >= gap) & inside
    if not bool(on.any()) or not bool(between.any()):
        where = "on the data" if not bool(on.any()) else "in a gap (far from every input, inside their range)"
        raise ValueError(
            f"in_between: no query point lies {where} (near={near:.3g}, gap={gap:.3g} in standardised "
            "units): give queries there (gap_points makes gap queries) or other distances"
        )
    sd_on, sd_gap = float(s[on].mean()), float(s[between].mean())
    if not sd_on > 0:
        raise ValueError(
            "in_between: the epistemic sd is 0 at every query on the data (every draw the same "
            "function? a rate of 0), so no ratio to it exists"
        )
    return InBetween(sd_on, sd_gap, sd_gap / sd_on, int(on.sum()), int(between.sum()), near, gap)


def gap_points(
    x_train: object, num: int = 1000, *, near: float | None = None, gap: float | None = None, seed: int = 0
) -> torch.Tensor:
    """Up to ``num`` queries in the gaps: midpoints of random pairs of training inputs that lie at
    least ``gap`` from every training input (in the inputs' units, ``[M, D]``; empty where the
    inputs have no gaps)."""
    if not is_positive_int(num) or num > MAX_GAP_POINTS:
        raise ValueError(f"gap_points: num must be an int in [1, {MAX_GAP_POINTS:,}], got {num!r}")
    train = _distances(x_train, gap, near)
    g = torch.Generator().manual_seed(check_seed(seed, "gap_points"))
    pairs = torch.randint(len(train.z), (2, 20 * num), generator=g)
    mid = (train.z[pairs[0]] + train.z[pairs[1]]) / 2
    out = mid[_nearest(mid, train.z) >= train.gap][:num] * train.scale + train.mean
    given = as_tensor(x_train, "gap_points: x_train")
    return out.to(given.dtype) if given.is_floating_point() else out
