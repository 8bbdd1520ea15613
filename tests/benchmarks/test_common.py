"""benchmarks/common.py's ``write``: atomic, an earlier run kept beside the new one, no link followed."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import common


def test_a_rerun_keeps_the_earlier_result_beside_it(tmp_path, monkeypatch):
    monkeypatch.setattr(common, "RESULTS", tmp_path)
    common.write("bench", {"run": 1})
    common.write("bench", {"run": 2})
    common.write("bench", {"run": 3})
    assert json.loads((tmp_path / "bench.json").read_text()) == {"run": 3}
    earlier = sorted(p for p in tmp_path.iterdir() if p.name != "bench.json")
    assert sorted(json.loads(p.read_text())["run"] for p in earlier) == [1, 2]
    assert all(p.name.startswith("bench.") and p.suffix == ".json" for p in earlier)


def test_a_link_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(common, "RESULTS", tmp_path)
    target = tmp_path / "elsewhere.json"
    target.write_text("{}")
    (tmp_path / "bench.json").symlink_to(target)
    with pytest.raises(SystemExit, match="is a link"):
        common.write("bench", {"run": 1})
    assert target.read_text() == "{}"
