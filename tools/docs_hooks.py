"""MkDocs hooks: index pages for the result folders under ``docs/results``, and maths in docstrings.

The folders hold the JSON files the docs' tables are made from (1,180 of them for the UCI
benchmark). MkDocs copies them into the site but shows no folder listing, so a link to a folder
would be dead: this hook adds ``results/index.md`` and one ``results/<folder>/index.md`` per
folder, generated at build time from what is there. Files named ``<dataset>_<method>_splitNN.json``
are grouped into one row per data set and method, with a link per split.

The docstrings write maths as Sphinx's ``:math:`...``` role, which the API pages would show as
text: it becomes the ``arithmatex`` span that KaTeX renders on the rest of the site.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

MATH_ROLE = re.compile(r":math:<code>(.*?)</code>", flags=re.S)
SPLIT = re.compile(r"^(?P<dataset>[^_]+)_(?P<method>.+)_split(?P<split>\d+)\.json$")
ABOUT = {
    "uci": "the UCI benchmark, one file per data set, method and split ([UCI benchmark](../uci.md))",
    "uci-cuda": "the UCI benchmark run on a GPU ([UCI benchmark](../uci.md))",
    "mnist": "the MNIST experiments ([MNIST](../mnist.md))",
    "benchmarks-h200": "the benchmarks run on an H200 GPU ([Performance](../performance.md))",
}


# the pages as they stood before they were cut to their answer: kept, not built (mkdocs.yml)
NOT_LISTED = {"history"}


def _count(n: int) -> str:
    return f"{n} file" + ("" if n == 1 else "s")


def folder_page(name: str, files: list[str]) -> str:
    """The index page of one result folder: split files grouped, the others listed."""
    grouped: dict[tuple[str, str], list[tuple[int, str]]] = defaultdict(list)
    others = []
    for file in sorted(files):
        match = SPLIT.match(file)
        if match:
            grouped[match["dataset"], match["method"]].append((int(match["split"]), file))
        else:
            others.append(file)
    lines = [f"# `docs/results/{name}`", "", f"{_count(len(files))}.", ""]
    if grouped:
        lines += ["| data set | method | splits |", "| --- | --- | --- |"]
        for (dataset, method), splits in sorted(grouped.items()):
            links = " ".join(f"[{split}]({file})" for split, file in sorted(splits))
            lines.append(f"| {dataset} | {method} | {links} |")
        lines.append("")
    lines += [f"- [{file}]({file})" for file in others]
    return "\n".join(lines) + "\n"


def top_page(folders: dict[str, list[str]]) -> str:
    lines = ["# Result files", "", "The JSON files behind the tables and figures of these pages.", ""]
    for name, files in sorted(folders.items()):
        about = ABOUT.get(name, "")
        lines.append(
            f"- [`{name}/`]({name}/index.md): {_count(len(files))}" + (f"; {about}" if about else "")
        )
    return "\n".join(lines) + "\n"


def result_folders(docs_dir: Path) -> dict[str, list[str]]:
    root = docs_dir / "results"
    if not root.is_dir():
        return {}
    return {
        folder.name: [f.name for f in folder.iterdir() if f.is_file()]
        for folder in sorted(root.iterdir())
        if folder.is_dir() and folder.name not in NOT_LISTED
    }


def on_files(files, config):  # MkDocs passes its Files and config; mkdocs is imported only here
    from mkdocs.structure.files import File

    folders = result_folders(Path(config["docs_dir"]))
    if not folders:
        return files
    files.append(File.generated(config, "results/index.md", content=top_page(folders)))
    for name, names in folders.items():
        files.append(File.generated(config, f"results/{name}/index.md", content=folder_page(name, names)))
    return files


def sphinx_maths(html: str) -> str:
    """``:math:`x``` (rendered as ``:math:<code>x</code>``) as inline maths for KaTeX."""
    return MATH_ROLE.sub(lambda m: f'<span class="arithmatex">\\({m[1]}\\)</span>', html)


def on_page_content(html: str, page, config, files) -> str:  # MkDocs passes its own objects
    return sphinx_maths(html)
