"""What a UCI results folder holds besides finished splits: trainings in progress, grid searches waiting."""

from __future__ import annotations

from pathlib import Path

from ..core.checkpoint import read_checkpoint
from ..core.store import ResultStore

__all__ = ["status"]


def status(out: Path) -> list[str]:
    """Each training in progress (its checkpoint: epochs done, training time so far, and the
    time to go at that rate) and each finished grid search still waiting for its final model.
    One line each; none if neither. Checkpoints are read without unpickling (a file that is
    not one is an error naming it)."""
    store, lines = ResultStore(out), []
    for path in store.checkpoints():
        desc, done, total, seconds = _progress(path)
        to_go = seconds / max(done, 1) * (total - done)
        lines.append(
            f"{desc}: epoch {done}/{total}, {seconds / 60:.1f} min of training kept, "
            f"about {to_go / 60:.0f} min to go at that rate ({path.name})"
        )
    waiting: dict[tuple[str, str], list[int]] = {}
    for path in store.grids():
        record = store.read_grid(path)
        waiting.setdefault((record["dataset"], path.name.rsplit("_split", 1)[0]), []).append(record["split"])
    for (dataset, stem), splits in waiting.items():
        name = stem[len(dataset) + 1 :]
        lines.append(f"{dataset} {name}: grid search done, final models to train for splits {splits}")
    return lines


def _progress(path: Path) -> tuple[str, int, int, float]:
    """What a checkpoint says of its training: its name, epochs done and planned, and seconds;
    a file that lacks one of them is an error naming it."""
    state = read_checkpoint(path)
    try:
        return str(state["desc"]), len(state["history"]), int(state["epochs"]), float(state["seconds"])
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(
            f"{path} is not a training checkpoint this version can read (a missing or bad field: {e}); "
            "remove it to train from the start"
        ) from None
