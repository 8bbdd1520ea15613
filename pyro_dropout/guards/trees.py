"""The tree of a call's arguments or a function's result: tuples, lists, named tuples and dicts
(a Hugging Face model output is a dict), flattened to their leaves and a hashable description of
the containers (:func:`flatten`), and built again from new leaves (:func:`unflatten`)."""

from __future__ import annotations

from typing import Any

__all__ = ["Spec", "flatten", "unflatten"]

Spec = Any  # None for a leaf; (type, keys or None, child specs) for a container


def flatten(tree: Any) -> tuple[list[Any], Spec]:
    """The leaves of ``tree`` in order, and the description of its containers."""
    leaves: list[Any] = []
    return leaves, _flatten(tree, leaves)


def _flatten(tree: Any, leaves: list[Any]) -> Spec:
    kind = type(tree)
    if isinstance(tree, dict):
        keys = tuple(tree)
        return kind, keys, tuple(_flatten(tree[k], leaves) for k in keys)
    if kind is tuple or kind is list or (isinstance(tree, tuple) and hasattr(tree, "_fields")):
        return kind, None, tuple(_flatten(v, leaves) for v in tree)
    leaves.append(tree)
    return None


def unflatten(leaves: list[Any], spec: Spec) -> Any:
    """The tree described by ``spec`` holding ``leaves``."""
    given = iter(leaves)
    return _build(given, spec)


def _build(given: Any, spec: Spec) -> Any:
    if spec is None:
        return next(given)
    kind, keys, children = spec
    values = [_build(given, child) for child in children]
    if keys is not None:
        built = dict(zip(keys, values, strict=True))
        return built if kind is dict else kind(built)
    if kind is tuple or kind is list:
        return kind(values)
    return kind(*values)  # a named tuple
