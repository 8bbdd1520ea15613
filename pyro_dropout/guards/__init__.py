"""Guards of recorded graphs: what a recording read (:mod:`.reads`), the fingerprint of values
(:mod:`.fingerprint`), the guard read before every replay (:mod:`.guard`), and the trees of a
call's arguments (:mod:`.trees`)."""

from .fingerprint import BUDGET, Fingerprinter, TooLarge, Watch, is_library
from .guard import (
    Guard,
    Root,
    Snapshot,
    found_roots,
    object_roots,
    pyro_handlers,
    restoring,
    runtime_state,
    set_torch_rng,
    signature,
    tensors_of,
    torch_rng,
    with_tensors,
)
from .reads import Reads, user_line, watching

__all__ = [
    "BUDGET",
    "Fingerprinter",
    "Guard",
    "Reads",
    "Root",
    "Snapshot",
    "TooLarge",
    "Watch",
    "found_roots",
    "is_library",
    "object_roots",
    "pyro_handlers",
    "restoring",
    "runtime_state",
    "set_torch_rng",
    "signature",
    "tensors_of",
    "torch_rng",
    "user_line",
    "watching",
    "with_tensors",
]
