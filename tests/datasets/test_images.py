"""The idx loaders: both spellings of the names, gzip or plain, and a clear error naming the file
for every way a file can be wrong."""

import gzip
import struct

import numpy as np
import pytest

from pyro_dropout.datasets import default_data_dir, download_images, load_images, read_idx


def _idx(values, dims, magic=None):
    header = struct.pack(">HBB", 0, 0x08, dims) if magic is None else struct.pack(">I", magic)
    return header + struct.pack(f">{dims}I", *values.shape) + values.astype(np.uint8).tobytes()


def _write(folder, images, labels, dotted=False, gz=True, prefix="train"):
    folder.mkdir(parents=True, exist_ok=True)
    sep = "." if dotted else "-"
    for stem, kind, payload in (("images", "idx3", images), ("labels", "idx1", labels)):
        name = f"{prefix}-{stem}{sep}{kind}-ubyte" + (".gz" if gz else "")
        (folder / name).write_bytes(gzip.compress(payload) if gz else payload)


def _images(n=5):
    g = np.random.default_rng(0)
    return g.integers(0, 256, (n, 28, 28)), g.integers(0, 10, n)


@pytest.mark.parametrize("dotted", [False, True], ids=["hyphen", "dotted"])
@pytest.mark.parametrize("gz", [True, False], ids=["gzip", "plain"])
def test_both_spellings_gzip_or_plain(tmp_path, dotted, gz):
    x, y = _images()
    _write(tmp_path / "mnist", _idx(x, 3), _idx(y, 1), dotted, gz)
    data = load_images("mnist", "train", tmp_path)
    assert data.x.shape == (5, 1, 28, 28) and data.x.dtype == np.float32
    assert np.allclose(data.x[:, 0] * 255, x) and (data.y == y).all()


def test_every_bad_file_is_named(tmp_path):
    x, y = _images()
    folder = tmp_path / "mnist"
    cases = {
        "magic number 0x00000c03 is not": (_idx(x, 3, magic=0x00000C03), _idx(y, 1)),  # an int32 idx
        "too short for an idx header": (b"\x00\x00", _idx(y, 1)),
        r"header says \(5, 28, 28\) = 3920 values, the file holds 3919": (_idx(x, 3)[:-1], _idx(y, 1)),
        "4 labels for the 5 images": (_idx(x, 3), _idx(y[:4], 1)),
        "label 12 is not a class 0-9": (_idx(x, 3), _idx(np.array([1, 2, 12, 3, 4]), 1)),
    }
    for message, (images, labels) in cases.items():
        _write(folder, images, labels)
        with pytest.raises(ValueError, match=message) as caught:
            load_images("mnist", "train", tmp_path)
        assert "train-" in str(caught.value)  # the file is named
    (folder / "train-images-idx3-ubyte.gz").write_bytes(b"\x1f\x8b not really gzip")
    with pytest.raises(ValueError, match=r"train-images-idx3-ubyte.gz: not a readable \(gzip\) idx file"):
        read_idx(folder / "train-images-idx3-ubyte.gz", 3)
    with pytest.raises(FileNotFoundError, match="no t10k-images file"):
        load_images("mnist", "test", tmp_path)
    with pytest.raises(FileNotFoundError, match=r"--data-dir or .PYRO_DROPOUT_DATA"):
        load_images("fashion-mnist", "train", tmp_path)
    with pytest.raises(ValueError, match="not a plain folder name"):
        load_images("../mnist", "train", tmp_path)


def test_download_checks_every_file_against_its_checksum(tmp_path):
    source = tmp_path / "mirror"
    x, y = _images()
    _write(source, _idx(x, 3), _idx(y, 1))
    _write(source, _idx(x, 3), _idx(y, 1), prefix="t10k")
    with pytest.raises(ValueError, match=r"checksum mismatch for fashion-mnist/train-images-idx3-ubyte\.gz"):
        download_images("fashion-mnist", tmp_path / "data", source=source.as_uri())
    assert not (tmp_path / "data" / "fashion-mnist" / "train-images-idx3-ubyte.gz").exists()
    with pytest.raises(ValueError, match="no public idx source for 'notmnist'"):
        download_images("notmnist", tmp_path / "data")
    real = default_data_dir() / "fashion-mnist"
    if not (real / "train-images-idx3-ubyte.gz").is_file():
        pytest.skip("the Fashion-MNIST files are not here")
    folder = download_images("fashion-mnist", tmp_path / "data", source=real.as_uri())  # the real files pass
    assert len(load_images("fashion-mnist", "test", tmp_path / "data")) == 10_000
    assert folder.name == "fashion-mnist"


def test_co2_comes_checked_from_its_source_and_loads(tmp_path):
    from pyro_dropout.datasets import download_co2, load_co2

    mirror = tmp_path / "mirror.csv"
    mirror.write_text("date,co2\n19580329,316.1\n")
    with pytest.raises(ValueError, match=r"checksum mismatch for co2/co2\.csv"):
        download_co2(tmp_path / "data", source=mirror.as_uri())
    assert not (tmp_path / "data" / "co2" / "co2.csv").exists()
    with pytest.raises(FileNotFoundError, match="pyro-dropout download co2 --data-dir DIR"):
        load_co2(tmp_path / "data")
    real = default_data_dir() / "co2" / "co2.csv"
    if not real.is_file():
        pytest.skip("the CO2 file is not here")
    path = download_co2(tmp_path / "data", source=real.as_uri())  # the real file passes
    assert path.read_bytes() == real.read_bytes() and len(load_co2(tmp_path / "data").t) > 2000
