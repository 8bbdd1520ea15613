"""Build an ArviZ object from groups of NumPy arrays, on either ArviZ API (no torch needed here).

* arviz 0.x (Python 3.11 and older): ``az.from_dict(posterior=..., ...)`` -> ``InferenceData``;
* arviz >= 1 (Python >= 3.12): ``az.from_dict({"posterior": {...}, ...})`` -> ``xarray.DataTree``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["arviz_major", "build"]


def arviz_major() -> int:
    import arviz as az

    return int(az.__version__.split(".")[0])


def build(
    groups: dict[str, dict[str, np.ndarray]], coords: dict | None = None, dims: dict | None = None
) -> Any:
    """``groups``: ``{"posterior": {name: [chain, draw, ...]}, ..., "observed_data": {name: [...]}}``."""
    import arviz as az

    from_dict: Any = az.from_dict
    if arviz_major() >= 1:
        return from_dict(groups, coords=coords, dims=dims)
    return from_dict(**groups, coords=coords, dims=dims)
