"""Time every command's ``--quick`` setting, the promise of ``core.QUICK_BUDGET``: each command
runs in its own process, one after another, and its wall time is kept in a JSON file as it ends
(a rerun skips the commands already timed with the same code and threads).

    python tools/time_quick.py docs/results/quick_times.json --threads 2
    python tools/time_quick.py out.json --only "mnist ood" --only co2

Each record holds the wall time and the CPU time (user and system, of the command's process).
With ``--threads 1`` the CPU time is the work of one core whatever else the machine runs, so
"CPU time under the budget" is the conservative reading of "under 10 minutes on 2 CPU cores"
on a machine that is busy with other work. The docs quote the stored file through
:func:`table`; ``tests/test_docs.py`` checks that every command is there, ran, is within the
budget in wall time, and that docs/performance.md shows the file's table.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

from pyro_dropout_experiments.core.atomic import write_atomically

# every command that trains, as a user tries it first (the data from the default folder)
COMMANDS: dict[str, list[str]] = {
    "demo": ["demo"],
    "uci mc-dropout": ["uci", "--dataset", "bostonHousing", "--method", "mc-dropout"],
    "uci bbalpha-0.5": ["uci", "--dataset", "bostonHousing", "--method", "bbalpha-0.5"],
    "mnist ood": ["mnist", "ood"],
    "mnist rotated": ["mnist", "rotated"],
    "mnist concrete": ["mnist", "concrete"],
    "mnist bbalpha": ["mnist", "bbalpha"],
    "mnist adversarial": ["mnist", "adversarial"],
    "co2": ["co2"],
    "solar": ["solar"],
    "synthetic": ["synthetic"],
    "forecast": ["forecast"],
    "bandit": ["bandit"],
    "rl": ["rl"],
    "dynamics": ["dynamics"],
    "active-learning": ["active-learning"],
    "lm-uncertainty": ["lm-uncertainty"],
}
BUDGET_MINUTES = 10.0  # core.QUICK_BUDGET: "under 10 minutes on 2 CPU cores"


def _head() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        )
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def time_command(argv: list[str], threads: int, keep: Path | None = None) -> dict:
    """Run ``pyro-dropout ARGV --quick`` in a fresh output folder (``keep``: that folder, kept);
    its wall time and exit status."""
    with tempfile.TemporaryDirectory() as scratch:
        out = str(keep) if keep is not None else scratch
        line = [sys.executable, "-m", "pyro_dropout_experiments.cli", *argv, "--quick", "--quiet"]
        line += ["--threads", str(threads), "--out", out]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run(line, capture_output=True, text=True, check=False)
        seconds = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {
        "seconds": round(seconds, 1),
        "cpu_seconds": round(cpu, 1),
        "status": done.returncode,
        "last_line": done.stdout.strip()[-200:],
    }


def table(record: dict) -> str:
    """The markdown table docs/performance.md quotes: each command's wall and CPU minutes."""
    lines = ["| command | wall time | CPU time (all threads) | threads | measured |"]
    lines.append("|---|---:|---:|---:|---|")
    for name in COMMANDS:
        r = record["commands"][name]
        lines.append(
            f"| `{r['command']}` | {r['seconds'] / 60:.1f} min | {r['cpu_seconds'] / 60:.1f} min | "
            f"{r['threads']} | {r['date']}, {r['commit']} |"
        )
    return "\n".join(lines) + "\n"


def _write(path: Path, record: dict) -> None:
    write_atomically(path, json.dumps(record, indent=1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="the JSON file of the times (kept and added to)")
    parser.add_argument(
        "--threads", type=int, default=2, help="PyTorch's threads for each command (default 2)"
    )
    parser.add_argument("--only", action="append", default=None, help="time only this command (repeatable)")
    parser.add_argument("--keep", type=Path, default=None, help="keep each command's results in KEEP/NAME")
    args = parser.parse_args(argv)
    path = Path(args.out)
    record = (
        json.loads(path.read_text()) if path.is_file() else {"budget_minutes": BUDGET_MINUTES, "commands": {}}
    )
    for name, words in COMMANDS.items():
        if args.only and name not in args.only:
            continue
        kept = record["commands"].get(name, {})
        if kept.get("commit") == _head() and kept.get("threads") == args.threads and kept.get("status") == 0:
            continue
        keep = args.keep / name.replace(" ", "-") if args.keep is not None else None
        result = time_command(words, args.threads, keep)
        record["commands"][name] = result | {
            "threads": args.threads,
            "commit": _head(),
            "date": date.today().isoformat(),
            "command": "pyro-dropout " + " ".join(words) + " --quick",
        }
        _write(path, record)
        minutes, cpu = result["seconds"] / 60, result["cpu_seconds"] / 60
        print(f"{name}: {minutes:.1f} min, CPU {cpu:.1f} min (status {result['status']})", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
