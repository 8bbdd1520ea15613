"""Guides: ``DropoutGuide``, an autoguide with the dropout variational family."""

from .dropout_guide import DropoutGuide, DropoutSpec, Rate
from .initialization import init_sites_to, init_to_fan_in, init_to_glorot, is_gaussian_prior
from .ownership import GuideConflictError, apart

__all__ = [
    "DropoutGuide",
    "DropoutSpec",
    "GuideConflictError",
    "Rate",
    "apart",
    "init_sites_to",
    "init_to_fan_in",
    "init_to_glorot",
    "is_gaussian_prior",
]
