"""One-dimensional series of paper 000's regression figures: Mauna Loa CO2 and solar irradiance.

Both files come from outside and are read as untrusted text: a malformed line is an error that
names the file and the line, and a missing reading (an empty field) is skipped, never read as 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .uci import FLOAT32_MAX, default_data_dir

__all__ = ["Series", "linear_noise", "load_co2", "load_solar"]


@dataclass
class Series:
    """Readings ``y`` ``[n]`` at times ``t`` ``[n]`` (decimal years, increasing), from ``path``."""

    t: np.ndarray
    y: np.ndarray
    path: Path


def _file(data_dir: str | Path | None, *parts: str) -> Path:
    path = (Path(data_dir) if data_dir is not None else default_data_dir()).joinpath(*parts)
    if not path.is_file():
        get = (
            "or fetch it: `pyro-dropout download co2 --data-dir DIR`"
            if parts[0] == "co2"
            else "or put the file there (NOAA's paleoclimatology archive holds it)"
        )
        raise FileNotFoundError(
            f"{path}: no such file (give the folder holding {parts[0]}/ as --data-dir, {get})"
        )
    return path


def _float(text: str, path: Path, line: int) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{path}, line {line}: {text!r} is not a number") from None
    if not math.isfinite(value):
        raise ValueError(f"{path}, line {line}: {text!r} is not a finite number")
    if abs(value) > FLOAT32_MAX:
        raise ValueError(
            f"{path}, line {line}: {text!r} is beyond float32's range, in which the models compute"
        )
    return value


def _decimal_year(stamp: str, path: Path, line: int) -> float:
    """``YYYYMMDD`` as a decimal year (day of the year over the year's length)."""
    import datetime

    try:
        day = datetime.date(int(stamp[:4]), int(stamp[4:6]), int(stamp[6:8]))
    except ValueError:
        raise ValueError(f"{path}, line {line}: {stamp!r} is not a date YYYYMMDD") from None
    start, end = datetime.date(day.year, 1, 1), datetime.date(day.year + 1, 1, 1)
    return day.year + (day - start).days / (end - start).days


def _checked(t: list[float], y: list[float], path: Path) -> Series:
    if len(t) < 2:
        raise ValueError(f"{path}: fewer than two readings")
    times = np.asarray(t)
    if (np.diff(times) <= 0).any():
        line = int(np.flatnonzero(np.diff(times) <= 0)[0])
        raise ValueError(f"{path}: the times are not increasing (reading {line + 2})")
    return Series(times, np.asarray(y), path)


def load_co2(data_dir: str | Path | None = None) -> Series:
    """The weekly Mauna Loa CO2 readings (ppm; Keeling & Whorf 2004), ``co2/co2.csv``: a header
    ``date,co2``, then ``YYYYMMDD,value`` with an empty value for a missing week (skipped)."""
    path = _file(data_dir, "co2", "co2.csv")
    lines = path.read_text().splitlines()
    if not lines or lines[0].strip().lower() != "date,co2":
        raise ValueError(f"{path}, line 1: expected the header 'date,co2'")
    t, y = [], []
    for number, text in enumerate(lines[1:], start=2):
        fields = text.strip().split(",")
        if fields == [""]:
            continue
        if len(fields) != 2:
            raise ValueError(f"{path}, line {number}: expected 'date,co2', got {text!r}")
        if fields[1].strip():
            t.append(_decimal_year(fields[0].strip(), path, number))
            y.append(_float(fields[1], path, number))
    return _checked(t, y, path)


def load_solar(data_dir: str | Path | None = None, column: str = "11yrCYCLE+BKGRND") -> Series:
    """The reconstructed total solar irradiance 1610-2000 (W/m^2; Lean 2004),
    ``solar/irradiance_data.txt``: a header naming the columns, then one year a line. ``column``:
    the 11-year cycle with the background (default), or the cycle alone (``11yrCYCLE``)."""
    path = _file(data_dir, "solar", "irradiance_data.txt")
    lines = path.read_text().splitlines()
    header = lines[0].split() if lines else []
    if not header or header[0] != "YEAR" or column not in header:
        raise ValueError(
            f"{path}, line 1: expected a header YEAR ... with the column {column!r}, got {header}"
        )
    at = header.index(column)
    t, y = [], []
    for number, text in enumerate(lines[1:], start=2):
        fields = text.split()
        if not fields:
            continue
        if len(fields) != len(header):
            raise ValueError(f"{path}, line {number}: expected {len(header)} columns, got {len(fields)}")
        t.append(_float(fields[0], path, number))
        y.append(_float(fields[at], path, number))
    return _checked(t, y, path)


def linear_noise(n: int, seed: int = 0, noise_sd: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    r"""Paper 001's synthetic data: :math:`x \sim \mathcal{N}(0, 1)`,
    :math:`y = 2x + 8 + \epsilon`, :math:`\epsilon \sim \mathcal{N}(0, \sigma^2)`;
    ``x`` ``[n, 1]``, ``y`` ``[n]``."""
    if n < 1 or not noise_sd >= 0:
        raise ValueError(f"linear_noise: n >= 1 and noise_sd >= 0 needed, got {n}, {noise_sd}")
    g = np.random.default_rng(seed)
    x = g.normal(size=(n, 1))
    return x, 2.0 * x[:, 0] + 8.0 + noise_sd * g.normal(size=n)
