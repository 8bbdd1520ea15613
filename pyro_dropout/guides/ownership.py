"""Which guide a name in Pyro's global param store belongs to.

By default Pyro keeps every ``PyroModule`` parameter in one global store, by name, and a module
takes whatever value the store holds under its names. Two guides of models with the same site
names (a guide fitted, then a second fitted to compare) therefore share their parameters: the
first, run again, silently takes the second's values and overwrites its own. The store cannot
tell a second guide from a saved state loaded back (``pyro.get_param_store().load``), which is
meant to be taken, so the guides record which guide last set up each name, and which values in
the store a guide made (a loaded state is made by no guide). A guide is known by its lineage
(``guide.lineage``), which a copy keeps: a guide saved with ``torch.save`` and loaded back, or
deep-copied, runs on the names of the guide it copies (Pyro's own save and load pattern).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pyro

__all__ = ["GuideConflictError", "apart", "check_owner", "claim", "forget_on_collection", "make_room"]


class GuideConflictError(RuntimeError):
    """A guide was run on parameter names that a guide set up after it has taken over in Pyro's
    global param store. The set-up is at fault, not the model: losses and prediction pass it on
    unchanged."""


_OWNERS: dict[str, str] = {}  # a prefix of names -> the lineage of the guide that set them up last
# the store's values that a guide set up, by id (weak: a value the store no longer holds goes)
_MADE: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


def claim(guide: Any, prefix: str) -> None:
    """Record ``guide`` as the guide whose parameters are named ``prefix.*`` in the store, and
    the values it holds there as made by a guide (not loaded)."""
    _OWNERS[prefix] = lineage_of(guide)
    for _, value in _named(prefix):
        _MADE[id(value)] = value


def lineage_of(guide: Any) -> str:
    """The lineage a guide and its copies share (a guide without one: its own identity)."""
    return str(getattr(guide, "lineage", None) or id(guide))


def _named(prefix: str) -> list[tuple[str, Any]]:
    return [(n, v) for n, v in pyro.get_param_store().named_parameters() if n.startswith(prefix + ".")]


def _made_by_a_guide(value: Any) -> bool:
    return _MADE.get(id(value)) is value


def forget_on_collection(guide: Any, prefix: str) -> None:
    """Delete ``prefix.*`` from the store once ``guide`` is collected: for guides whose names no
    other guide will take (a name unique to the guide), so that their values do not pile up."""
    weakref.finalize(guide, _forget, prefix)


def _forget(prefix: str) -> None:
    store = pyro.get_param_store()
    for name, _ in _named(prefix):
        del store[name]


def check_owner(guide: Any, prefix: str) -> None:
    """Refuse to run ``guide`` on parameters that a guide set up after it has taken over (even
    one since deleted: its values stay in the store). After ``pyro.clear_param_store()`` the
    names are free again, and the guide running claims them."""
    if pyro.settings.get("module_local_params"):
        return  # every module keeps its own parameters: nothing is shared
    owner = _OWNERS.get(prefix)
    if owner is None or owner == lineage_of(guide):
        return
    if not any(name.startswith(prefix + ".") for name in pyro.get_param_store().keys()):
        claim(guide, prefix)
        return
    raise GuideConflictError(
        f"{type(guide).__name__}: another guide, set up after this one, holds the same parameter "
        f"names ('{prefix}.*') in Pyro's global param store, so this guide would silently take "
        f"its values. Give each guide its own names ({type(guide).__name__}(model, name=...)), or "
        "keep each module's parameters apart with pyro.settings.set(module_local_params=True) before "
        "building the models, or finish with one guide (and pyro.clear_param_store()) before "
        "setting up the next"
    )


@contextmanager
def apart(owner: Any = None) -> Iterator[None]:
    """Within the block, models and guides may be set up and fitted on names the caller's hold
    (K-fold refits, leave-one-out refits; ``owner``: a guide whose names are its own inside, a refit
    scored again); after it, Pyro's param store holds the caller's values again and every name
    belongs to the guide it belonged to, so the caller's fitted guide runs on."""
    owners = dict(_OWNERS)
    with pyro.get_param_store().scope():
        try:
            if owner is not None:
                _OWNERS[owner._pyro_name] = lineage_of(owner)
            yield
        finally:
            _OWNERS.clear()
            _OWNERS.update(owners)


def make_room(guide: Any, prefix: str, shapes: dict[str, tuple[int, ...]]) -> None:
    """Before a guide being set up takes its parameters ``prefix.<name>`` (``shapes``: by name)
    from the store: the values another guide made are dropped, whether that guide is alive (run
    again, it is refused by :func:`check_owner`) or not (so that a guide's start does not depend
    on when the collector ran), and the new guide starts from its own values: a loop over splits
    does not start each from the last one's fit, nor a second converted network predict with the
    first one's weights. Values no guide made (a saved state loaded back) are kept where their
    shapes fit, and refused where not."""
    if pyro.settings.get("module_local_params"):
        return
    store = pyro.get_param_store()
    mine = _OWNERS.get(prefix) == lineage_of(guide)
    for name, value in _named(prefix):
        if not mine and _made_by_a_guide(value):
            del store[name]  # an earlier guide's: this guide starts from its own values
            continue
        want = shapes.get(name[len(prefix) + 1 :])
        have = tuple(store[name].shape)
        if want is not None and have != tuple(want):
            raise ValueError(
                f"{type(guide).__name__}: Pyro's param store holds '{name}' with shape {have}, but this "
                f"model's site needs {tuple(want)}: the store holds another model's parameters; call "
                "pyro.clear_param_store() before setting up this model's guide"
            )
