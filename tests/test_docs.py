"""The API pages name every public name of every subpackage; the docs pages quote their stored runs."""

import importlib
import json
import re
from pathlib import Path

import pytest

from tests.scripts import load_script

DOCS = Path(__file__).resolve().parents[1] / "docs"
API = (DOCS / "api.md").read_text() + (DOCS / "api-analysis.md").read_text()  # the summary's two parts


@pytest.mark.parametrize(
    "module",
    [
        "distributions",
        "nn",
        "guides",
        "infer",
        "prediction",
        "metrics",
        "attacks",
        "policies",
        "lightning",
        "export",
        "datasets",
        "baselines",
        "runtime",
        "active",
        "front",
    ],
)
def test_every_public_name_is_documented(module):
    mod = importlib.import_module(f"pyro_dropout.{module}")
    missing = [name for name in mod.__all__ if f"`{name}" not in API and f".{name}(" not in API]
    assert not missing, f"docs/api.md does not document pyro_dropout.{module}: {missing}"


def test_uci_page_shows_the_kept_results():
    from pyro_dropout_experiments.uci import collect

    docs = Path(__file__).resolve().parents[1] / "docs"
    page = (docs / "uci.md").read_text()
    block = load_script("tools", "update_uci_docs").generated_block(collect(docs / "results" / "uci"))
    assert block in page, "docs/uci.md is out of date: run tools/update_uci_docs.py"
    assert (docs / "img" / "uci_test_ll.png").is_file()


def test_update_uci_docs(tmp_path):
    tool = load_script("tools", "update_uci_docs")
    results, docs = tmp_path / "results", tmp_path / "docs"
    (docs / "results" / "uci").mkdir(parents=True)

    def row(method: str, split: int, rmse: float) -> str:
        fields = {"dataset": "wine-quality-red", "method": method, "split": split, "rmse": rmse}
        return json.dumps(fields | {"rmse_standard": None, "test_ll": -1.0, "protocol_seconds": 60.0})

    # kept from an earlier refresh; the results folder no longer has it
    (docs / "results" / "uci" / "wine-quality-red_mfvi_split00.json").write_text(row("mfvi", 0, 0.9))
    results.mkdir()
    for i in range(2):
        (results / f"wine-quality-red_sgp_split{i:02d}.json").write_text(row("sgp", i, 0.6 + i / 10))
    (docs / "uci.md").write_text("# UCI\n\n" + tool.ANCHOR + "\nstale table\n\n## Notes\n\nby hand\n")
    tool.update(results, docs)
    page = (docs / "uci.md").read_text()
    assert "stale table" not in page and page.endswith("## Notes\n\nby hand\n")
    # columns mfvi, sgp: the kept run stays, the new ones are added (0.65 ± 0.05: mean ± SE of 0.6, 0.7)
    # (1/2: the kept mfvi column averages one split where the fullest column has two)
    assert "| wine-quality-red | 0.90 (1/2) | **0.65 ± 0.05** |" in page  # bold: the best of the full runs
    assert len(list((docs / "results" / "uci").iterdir())) == 3
    tool.update(results, docs, prune=True)  # now the page shows exactly the results folder
    page = (docs / "uci.md").read_text()
    assert "| wine-quality-red | **0.65 ± 0.05** |" in page  # one column: sgp
    assert sorted(p.name for p in (docs / "results" / "uci").iterdir()) == [
        "wine-quality-red_sgp_split00.json",
        "wine-quality-red_sgp_split01.json",
    ]
    assert (docs / "img" / "uci_test_ll.png").stat().st_size > 5000
    with pytest.raises(FileNotFoundError, match="no result files"):
        tool.update(tmp_path / "empty", docs)


def test_docs_site_serves_its_own_maths_renderer():
    """The maths renders offline: every script and style sheet of the site is a file in docs/."""
    repo = Path(__file__).resolve().parents[1]
    config = (repo / "mkdocs.yml").read_text()
    sections = re.findall(r"^extra_(?:javascript|css):\n((?:  - .*\n)+)", config, flags=re.M)
    assets = [line.strip()[2:] for section in sections for line in section.splitlines()]
    assert len(sections) == 2 and len(assets) >= 4
    assert any("katex" in a for a in assets)
    for asset in assets:
        assert "//" not in asset, f"{asset}: loaded from another site"
        assert (repo / "docs" / asset).is_file(), f"mkdocs.yml names {asset}, which docs/ lacks"
    fonts = repo / "docs" / "assets" / "katex" / "fonts"
    css = (repo / "docs" / "assets" / "katex" / "katex.min.css").read_text()
    assert all((fonts / name).is_file() for name in re.findall(r"fonts/([\w-]+\.woff2)", css))


def test_result_folder_pages_link_every_file():
    hooks = load_script("tools", "docs_hooks")
    files = [f"kin8nm_mc-dropout_split{i:02d}.json" for i in (1, 0, 10)] + ["notes.json"]
    page = hooks.folder_page("uci", files)
    # one row per data set and method, splits in numeric order, each a link; other files listed
    row = "| kin8nm | mc-dropout | [0](kin8nm_mc-dropout_split00.json) [1](kin8nm_mc-dropout_split01.json) "
    assert row + "[10](kin8nm_mc-dropout_split10.json) |" in page
    assert "- [notes.json](notes.json)" in page and "4 files." in page
    top = hooks.top_page({"uci": files, "other": ["a.json"]})
    assert "- [`uci/`](uci/index.md): 4 files; the UCI benchmark" in top
    assert "- [`other/`](other/index.md): 1 file\n" in top


def test_the_quick_settings_page_quotes_the_measured_times():
    """tools/time_quick.py's record (docs/results/quick_times.json) holds every command, each ran
    to the end within the quick budget, and docs/performance.md shows the record's own table (no
    hand-copied figure)."""
    tool = load_script("tools", "time_quick")
    docs = Path(__file__).resolve().parents[1] / "docs"
    record = json.loads((docs / "results" / "quick_times.json").read_text())
    assert set(record["commands"]) == set(tool.COMMANDS)
    assert all(run["status"] == 0 and run["threads"] == 2 for run in record["commands"].values())
    assert record["budget_minutes"] == tool.BUDGET_MINUTES == 10.0
    over = {name: run["seconds"] for name, run in record["commands"].items() if run["seconds"] > 600}
    assert not over, f"--quick over its 10 minutes: {over}"
    assert tool.table(record) in (docs / "performance.md").read_text()


def test_the_speed_claims_are_the_benchmark_of_records():
    """README.md's speed ranges and docs/performance.md's table are made by tools/speed_record.py
    from the stored runs of benchmarks/svi_step.py (docs/results/benchmarks/svi_step_cpu_record*.json)."""
    tool = load_script("tools", "speed_record")
    root = Path(__file__).resolve().parents[1]
    runs = tool.load()
    assert len(runs) >= 2 and all(run["machine"]["threads"] == 1 for run in runs)
    assert tool.table(runs) in (root / "docs" / "performance.md").read_text()
    readme = (root / "README.md").read_text()
    missing = {name: text for name, text in tool.claims(runs).items() if text not in readme}
    assert not missing, f"README.md does not state these ranges of the benchmark of record: {missing}"
    assert "1.2-1.6×" not in readme  # the earlier claim, against another raw step


def _stored_benchmark(name: str) -> dict:
    """A benchmark run kept for the docs, docs/results/benchmarks/NAME.json."""
    root = Path(__file__).resolve().parents[1]
    return json.loads((root / "docs" / "results" / "benchmarks" / f"{name}.json").read_text())


def test_the_compile_costs_quoted_are_the_stored_run():
    """The README's and docs/performance.md's compile times are benchmarks/compile_cost.py's stored
    run (docs/results/benchmarks/compile_cost_cpu.json)."""
    root = Path(__file__).resolve().parents[1]
    rows = _stored_benchmark("compile_cost_cpu")["rows"]
    readme, page = (root / "README.md").read_text(), (root / "docs" / "performance.md").read_text()
    cold, warm, old = rows["cold"], rows["warm"], rows["every_shape"]
    quoted = [f"{cold['first_steps_s']:.1f} s", f"{warm['first_steps_s']:.1f} s"]
    quoted.append(f"{cold['new_batch_first_step_s']:.2f} s")
    for text in quoted:
        assert text in readme and text in page, text
    assert f"{old['new_batch_first_step_s']:.2f} s (compiled)" in page


def test_the_process_dependence_row_is_the_stored_runs():
    """docs/performance.md's row of benchmarks/process_dependence.py: the range of its six states
    over its two stored runs, and the spread within one run."""
    root = Path(__file__).resolve().parents[1]
    page = (root / "docs" / "performance.md").read_text()
    runs = [_stored_benchmark(f"process_dependence_cpu_run{i}") for i in (1, 2)]
    states = ("alone", "alone_again", "contenders", "gc_frozen", "gc_off", "deleted")
    ratios = [run["rows"][key]["ratio"] for run in runs for key in states]
    assert f"{min(ratios):.2f}-{max(ratios):.2f}×" in page
    spreads = [
        max(run["rows"][k]["ratio"] for k in states) - min(run["rows"][k]["ratio"] for k in states)
        for run in runs
    ]
    assert f"({max(spreads):.2f}×)" in page


def test_the_wide_particles_table_is_the_stored_run():
    """docs/performance.md § 18 quotes benchmarks/wide_particles.py's stored run."""
    root = Path(__file__).resolve().parents[1]
    page = (root / "docs" / "performance.md").read_text()
    rows = _stored_benchmark("wide_particles_cpu")["rows"]
    for row in rows.values():
        assert f"| {row['ms']:.1f} ms | {row['vs_raw']:.2f}× |" in page, row
    readme = (root / "README.md").read_text()
    for name in ("library", "library_per_example"):
        assert f"{rows[name]['vs_raw']:.2f}×" in readme, name


def test_the_conformance_table_is_the_stored_run():
    """docs/own-model.md's battery table is tools/conformance_table.py's table of its stored JSON,
    and every architecture of the battery has a passed row there."""
    from tests.nn.conformance import cases

    tool = load_script("tools", "conformance_table")
    docs = Path(__file__).resolve().parents[1] / "docs"
    stored = json.loads((docs / "results" / "conformance" / "conformance.json").read_text())
    assert tool.table(stored["cases"]) in (docs / "own-model.md").read_text()
    assert set(stored["cases"]) == set(cases())
    assert all(row.get("passed") for row in stored["cases"].values())


def test_the_inputs_table_is_the_stored_run():
    """docs/inputs.md's table is tools/conformance_table.py --inputs's table of its stored JSON, and
    every case of tests/nn/conformance_inputs.py has a passed row there."""
    from tests.nn.conformance_inputs import cases

    tool = load_script("tools", "conformance_table")
    docs = Path(__file__).resolve().parents[1] / "docs"
    stored = json.loads((docs / "results" / "conformance" / "inputs.json").read_text())
    assert tool.table(stored["cases"]) in (docs / "inputs.md").read_text()
    assert set(stored["cases"]) == set(cases())
    assert all(row.get("passed") for row in stored["cases"].values())


def test_the_generation_table_is_the_stored_run():
    """docs/language-models.md's times are benchmarks/generation.py's run kept in docs/results."""
    docs = Path(__file__).resolve().parents[1] / "docs"
    stored = json.loads((docs / "results" / "benchmarks" / "generation_cpu.json").read_text())
    page = (docs / "language-models.md").read_text()
    for kind in ("gpt2", "llama"):
        medians, ratios = stored[kind]["medians"], stored[kind]["ratios"]
        for name, value in medians.items():
            shown = f"{value:.3f} s" + ("" if name == "own generate x T" else f" ({ratios[name]:.2f}×)")
            assert shown in page, (kind, name)


def test_the_language_model_table_is_the_stored_run():
    """docs/language-models.md's table is lm_table of the run kept in docs/results/lm, its figure there."""
    from pyro_dropout_experiments.lm import lm_table

    docs = Path(__file__).resolve().parents[1] / "docs"
    stored = json.loads((docs / "results" / "lm" / "results.json").read_text())
    assert lm_table(stored) in (docs / "language-models.md").read_text()
    assert (docs / "img" / "language-models" / "lm.png").is_file()


def test_the_active_learning_tables_are_the_stored_runs():
    """docs/active-learning.md's tables are active_table and paper_table of the runs kept in
    docs/results/active-learning (the paper's column: PAPER_TABLE_1)."""
    from pyro_dropout_experiments.active.figure import active_table, paper_table, pooled

    docs = Path(__file__).resolve().parents[1] / "docs"
    kept = docs / "results" / "active-learning"
    names = ("mnist", "steps", "to-1000", "weight-decay/a", "weight-decay/b")
    epochs, steps, full, *decayed = (json.loads((kept / n / "results.json").read_text()) for n in names)
    decay = pooled(*decayed)
    page = (docs / "active-learning.md").read_text()
    for results in (epochs, steps, full, *decayed):
        assert active_table(results) in page
    columns = [
        ("50 epochs a round, to 300", epochs),
        ("at least 400 steps a round (3 runs; random: 2, to 300)", pooled(steps, full)),
        ("the same with the authors' weight decay, 1 run", decay),
    ]
    assert paper_table(columns) in page
    assert paper_table([("at least 400 steps a round, to 1,000", full)], error=0.05) in page
    assert paper_table([("dropout off", decay)], dropout_off=True) in page


def test_the_pages_cite_the_papers_one_way():
    """The user docs cite the project's papers by their key ("paper 000"), not as "[000]" or by a
    page's own "[1]" numbering (docstrings keep their own numbered References lists)."""
    docs = Path(__file__).resolve().parents[1] / "docs"
    pages = [*docs.glob("*.md"), *(docs / "tutorials").glob("*.md")]
    import re

    other = {
        p.name: m for p in pages if (m := re.findall(r"\[00\d\]|(?<![\w\]])\[[1-9]\](?!\()", p.read_text()))
    }
    other.pop("references.md", None)  # it explains the docstrings' numbered lists
    assert not other, other


def test_the_pages_are_short_enough_to_read_and_the_results_pages_open_with_a_figure():
    pages = [*DOCS.glob("*.md"), *(DOCS / "tutorials").glob("*.md")]
    words = {p.name: len(p.read_text().split()) for p in pages}
    assert not {k: v for k, v in words.items() if v > 4000}, "pages over 4,000 words"
    assert words["performance.md"] <= 2500 and words["uci.md"] <= 3000
    for name in ("performance.md", "uci.md", "mnist.md", "limits.md", "active-learning.md"):
        body = [line for line in (DOCS / name).read_text().splitlines()[1:] if line.strip()]
        assert any(line.startswith("![") for line in body[:3]), f"{name} does not open with its figure"
