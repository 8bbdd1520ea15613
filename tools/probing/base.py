"""What every probe shares: the probe, its classification, and small data."""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyro
import torch

from pyro_dropout import DropoutGuide
from pyro_dropout.nn import MLP

OUTCOMES = ("handled", "clear error", "unsafe", "silent wrong", "unnamed error", "raw traceback")
DEFECTS = OUTCOMES[2:]


@dataclass
class Probe:
    category: str
    what: str
    call: Callable[[], Any]
    names: tuple[str, ...]  # what a clear error names
    ok: Callable[[Any], bool] = lambda result: True  # what a handled result satisfies
    safe: Callable[[], bool] = lambda: True  # after the call, whatever its end: nothing was lost


def finite(value: Any) -> bool:
    if isinstance(value, torch.Tensor):
        return bool(torch.isfinite(value).all())
    return isinstance(value, int | float) and math.isfinite(value)


def small_data(n: int = 6, features: int = 3) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return torch.randn(n, features, generator=g), torch.randn(n, generator=g)


def fitted() -> tuple[MLP, DropoutGuide]:
    pyro.clear_param_store()
    model = MLP(3, hidden=(4,))
    guide = DropoutGuide(model, dropout=0.2)
    guide(*small_data())
    return model, guide


def classify(probe: Probe) -> tuple[str, str]:
    outcome, detail = _outcome(probe)
    if not probe.safe():
        return "unsafe", f"results lost or written outside --out ({outcome}: {detail})"
    return outcome, detail


def _outcome(probe: Probe) -> tuple[str, str]:
    try:
        result = probe.call()
    except (ValueError, TypeError) as e:
        message = str(e)
        named = any(n in message for n in probe.names)
        return ("clear error" if named else "unnamed error"), f"{type(e).__name__}: {message}"
    except Exception as e:  # every other exception is what the probe counts
        return "raw traceback", f"{type(e).__name__}: {e}"
    try:
        good = probe.ok(result)
    except Exception as e:
        return "silent wrong", f"the result could not be checked ({type(e).__name__}: {e})"
    return ("handled" if good else "silent wrong"), repr(result)[:120]


def idx_header(shape: tuple[int, ...]) -> bytes:
    """The header of an unsigned-byte idx file of ``shape`` (what ``datasets.read_idx`` reads)."""
    return struct.pack(">HBB", 0, 8, len(shape)) + struct.pack(f">{len(shape)}I", *shape)
