r"""An experiment's ``results.json``: keyed by the command and the settings that made it, written
atomically, never followed through a link, never replaced by another run's.

A command opens its file with :func:`open_results` before it computes anything: a file another
command wrote, or this command with other settings, is refused with one line naming ``--out``
and what differs (results are never replaced silently); a resumable command gets the kept runs
back. :func:`save_results` writes through a temporary file in the same folder and
``os.replace``, so a stop leaves the old file whole; a link at the path is refused.
"""

from __future__ import annotations

import contextvars
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .atomic import refuse_link, write_atomically
from .store import SCHEMA_VERSION, read_record

__all__ = [
    "check_scores",
    "command_name",
    "missing_runs",
    "naming_command",
    "open_results",
    "resume_runs",
    "save_results",
    "store_run",
]

_COMMAND: contextvars.ContextVar[str | None] = contextvars.ContextVar("pyro_dropout_command", default=None)


def command_name() -> str | None:
    """The ``pyro-dropout`` command running (``None`` when called from Python)."""
    return _COMMAND.get()


@contextmanager
def naming_command(name: str) -> Iterator[None]:
    token = _COMMAND.set(name)
    try:
        yield
    finally:
        _COMMAND.reset(token)


def _flat(settings: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in settings.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _differences(
    kept: dict[str, Any], now: dict[str, Any], ignore: tuple[str, ...], since: dict[str, Any]
) -> list[str]:
    a, b = _flat(kept), _flat(now)
    for key, old in since.items():  # a file from before the setting: it was made as ``old`` makes it
        a.setdefault(key, old)
    keys = sorted(k for k in set(a) | set(b) if k.split(".")[-1] not in ignore and k not in ignore)
    return [f"{k}={a.get(k)!r} there, {b.get(k)!r} here" for k in keys if a.get(k) != b.get(k)]


def open_results(
    out: Path,
    settings: dict[str, Any],
    which: tuple[str, ...] = (),
    resume: bool = False,
    since: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The record this run writes into ``out/results.json``: the kept one with its runs where this
    command made it with these settings and ``resume`` (``which``: the settings that only say which
    runs to make, free to differ; ``since``: settings added after files were written, each with the
    value that does what the command did before it, which a file without the setting was made
    with), else a fresh one; another command's file, or this command's with other settings, is
    refused."""
    path = Path(out) / "results.json"
    refuse_link(path)
    plain = json.loads(json.dumps(settings))  # tuples as the file holds them: lists
    command = command_name()
    fresh: dict[str, Any] = {"command": command, "settings": plain} if command else {"settings": plain}
    if not path.exists():
        return fresh
    kept = read_record(path, {"settings": (dict,)}, finite=True)
    if command and kept.get("command", command) != command:
        raise ValueError(
            f"--out {out} holds the results of `pyro-dropout {kept['command']}`, not of "
            f"`pyro-dropout {command}`: give this command a folder of its own"
        )
    differ = _differences(kept["settings"], plain, which, since or {})
    if differ:
        raise ValueError(
            f"--out {out} holds results made with other settings ({'; '.join(differ)}): give another "
            "--out to keep both, or the same settings to " + ("resume" if resume else "run them again")
        )
    return {**kept, "settings": plain, **({"command": command} if command else {})} if resume else fresh


def check_scores(out: Path, where: str, scores: Any, keys: tuple[str, ...]) -> dict[str, list[float]]:
    """A kept run's ``scores`` (``results.json``'s entry ``where``): a dict holding each of
    ``keys`` as a list of numbers, all of one length (a run adds one to each); else an error
    naming the file and the entry."""
    path = Path(out) / "results.json"
    fix = "remove it (or the entry) to run it again"
    if not isinstance(scores, dict) or any(not isinstance(scores.get(k), list) for k in keys):
        raise ValueError(f"{path}: {where} is not a dict of lists {list(keys)}; {fix}")
    lengths = {k: len(scores[k]) for k in keys}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"{path}: {where} holds lists of different lengths {lengths}; {fix}")
    if any(isinstance(v, bool) or not isinstance(v, int | float) for k in keys for v in scores[k]):
        raise ValueError(f"{path}: {where} holds values that are not numbers; {fix}")
    return scores


def save_results(out: Path, record: dict[str, Any]) -> Path:
    """Write ``record`` as ``out/results.json`` (stamped with the schema and the command) atomically."""
    path = Path(out) / "results.json"
    command = command_name()
    stamped = {"schema_version": SCHEMA_VERSION, **({"command": command} if command else {}), **record}
    try:
        text = json.dumps(stamped, indent=1, allow_nan=False)
    except ValueError:
        raise ValueError(f"{path}: a result to write is NaN or infinite; nothing was written") from None
    write_atomically(path, text)
    return path


def resume_runs(
    out: Path, settings: dict[str, Any], which: tuple[str, ...], since: dict[str, Any] | None = None
) -> dict[str, Any]:
    """``{"settings", "runs"}``: the kept runs of ``out/results.json`` where they were made with
    ``settings`` apart from ``which`` (the settings naming which runs to make, which a rerun may
    change; ``since``: as :func:`open_results`), else a fresh record; runs made with other settings
    are refused, never dropped."""
    record = open_results(out, settings, which, resume=True, since=since)
    record.setdefault("runs", {})
    return record


def missing_runs(
    results: dict[str, Any], groups: tuple[str, ...], repeats: int, seed: int
) -> list[tuple[str, int]]:
    """The ``(group, seed)`` pairs, ``repeats`` seeds from ``seed`` for each group, not yet in
    ``results["runs"]`` (a record of :func:`resume_runs`)."""
    runs = results["runs"]
    return [(g, seed + r) for g in groups for r in range(repeats) if str(seed + r) not in runs.get(g, {})]


def store_run(out: Path, results: dict[str, Any], group: str, seed: int, record: dict[str, Any]) -> None:
    """Put one run's ``record`` into ``results["runs"][group][seed]`` and save the file."""
    results["runs"].setdefault(group, {})[str(seed)] = record
    save_results(out, results)
