"""Which splits to run: ``"0-19"``, ``"3"`` or ``"0,2,5-7"``, each split once, ranges ascending."""

from __future__ import annotations

__all__ = ["parse_splits"]


def parse_splits(text: str) -> list[int]:
    """``"0-19"``, ``"3"`` or ``"0,2,5-7"`` -> split numbers; a ``ValueError`` naming the problem
    for a range that runs backwards (``5-2``), a split given twice (``0-3,2``) or anything else."""
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            raise ValueError(f"bad --splits {text!r}: use e.g. 0-19, 3 or 0,2,5-7")
        if hi and int(hi) < int(lo):
            raise ValueError(f"bad --splits {text!r}: the range {part.strip()} runs backwards")
        out += list(range(int(lo), int(hi or lo) + 1))
    twice = sorted({i for i in out if out.count(i) > 1})
    if twice:
        raise ValueError(f"bad --splits {text!r}: split(s) {twice} given more than once")
    return out
