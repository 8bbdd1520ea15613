"""The names results go by: a method with its variants (``mc-dropout-per-draw``,
``mc-dropout-2-layers``, ``mc-dropout-grid-network``), and the order of the tables."""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from .registry import method_class, method_names
from .settings import Settings

__all__ = [
    "GRID_NETWORK",
    "LAYERS",
    "PER_DRAW",
    "TAU_GRID",
    "Label",
    "label",
    "label_of",
    "parse_label",
    "table_order",
]

PER_DRAW = "-per-draw"  # the label suffix of dropout runs trained with one mask per function draw
LAYERS = "-layers"  # "-2-layers": the label suffix of runs with more than one hidden layer
GRID_NETWORK = "-grid-network"  # the label suffix of runs scored with the grid network (Settings.retrain)
TAU_GRID = "-own-tau-grid"  # the label suffix of runs whose precision grid is not the published one


class Label(NamedTuple):
    """What a table label says about its runs (see :func:`label`)."""

    method: str
    per_example_masks: bool
    hidden_layers: int = 1
    retrain: bool = True
    own_tau_grid: bool = False


def _masked(method: str) -> bool:
    return method in method_names() and method_class(method)[0].masked


def _layered(method: str) -> bool:
    return method not in method_names() or method_class(method)[0].layered


def label(
    method: str,
    per_example_masks: bool,
    hidden_layers: int = 1,
    retrain: bool = True,
    own_tau_grid: bool = False,
) -> str:
    """The name a method's results go by: a dropout method trained with one mask per example
    (the protocol's default) is ``mc-dropout``; with one mask per function draw it is
    ``mc-dropout-per-draw``. A network with more than one hidden layer adds ``-L-layers`` (the
    sparse GP has no layers), and the test score of the grid network that validation chose,
    instead of a retrained one, adds ``-grid-network``; a precision grid other than the
    published ``tau_values.txt`` (``--tau-values``) adds ``-own-tau-grid`` last."""
    name = method + PER_DRAW if _masked(method) and not per_example_masks else method
    if hidden_layers != 1 and _layered(method):
        name += f"-{hidden_layers}{LAYERS}"
    name = name if retrain else name + GRID_NETWORK
    return name + TAU_GRID if own_tau_grid else name


def parse_label(name: str) -> Label:
    """``(method, per_example_masks, hidden_layers, retrain, own_tau_grid)`` of a label made by
    :func:`label`."""
    own = name.endswith(TAU_GRID)
    name = name.removesuffix(TAU_GRID)
    retrain = not name.endswith(GRID_NETWORK)
    name = name.removesuffix(GRID_NETWORK)
    layers = 1
    match = re.fullmatch(rf"(.+)-(\d+){LAYERS}", name)
    if match:
        name, layers = match.group(1), int(match.group(2))
    if name.endswith(PER_DRAW) and _masked(name.removesuffix(PER_DRAW)):
        return Label(name.removesuffix(PER_DRAW), False, layers, retrain, own)
    return Label(name, True, layers, retrain, own)


def label_of(row: dict[str, Any]) -> str:
    """The label of a stored result (settings it lacks: those of runs made before them)."""
    s = Settings.from_stored(row.get("settings", {}))
    return label(row["method"], s.per_example_masks, s.hidden_layers, s.retrain, bool(s.tau_values))


def table_order() -> tuple[str, ...]:
    """Every registered method in registration order, each followed by its variants."""
    order: list[str] = []
    for m in method_names():
        order.append(m)
        if _masked(m):
            order.append(m + PER_DRAW)
        order.append(m + GRID_NETWORK)
        order.append(m + TAU_GRID)
    return tuple(order)
