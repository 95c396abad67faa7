"""docs/architecture.md matches the tree: every path its tree names exists, and every source
file of the folders it describes is named there (a new module gets a line, or the test says
which one is missing)."""

from __future__ import annotations

import re
import subprocess

from conftest import ROOT

DOC = ROOT / "docs" / "architecture.md"
# Folders whose every tracked file the tree names (package/ and tests/ are described by
# folder; generated package metadata under function/package/ by its folder too).
LISTED = ("kcl/", "function/", "dot_inference/", "benchmarks/")
BY_FOLDER = ("function/package/",)


def _tree() -> list[str]:
    """Paths in the '## The tree' block, rebuilt from the indentation (two spaces a level)."""
    text = DOC.read_text()
    block = re.search(r"## The tree\n\n```\n(.*?)```", text, re.S)
    assert block, "docs/architecture.md has no '## The tree' code block"
    paths: list[str] = []
    stack: list[str] = []
    for line in block.group(1).splitlines():
        m = re.match(r"^( *)(\S+)", line)
        if not m or len(m.group(1)) >= 30:  # a comment continued on its own line
            continue
        depth = len(m.group(1)) // 2
        stack = [*stack[:depth], m.group(2)]
        paths.append("".join(stack))
    return paths


def _files(*paths: str) -> list[str]:
    """Files git tracks (or would), under `paths` (all when none)."""
    return subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", *paths],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()


def _tracked() -> list[str]:
    out = _files(*LISTED)
    return [p for p in out if (ROOT / p).is_file() and not p.startswith(BY_FOLDER)]


def test_every_path_in_the_tree_exists() -> None:
    missing = [p for p in _tree() if not (ROOT / p).exists()]
    assert not missing, f"docs/architecture.md names paths that do not exist: {missing}"


def test_every_source_file_is_in_the_tree() -> None:
    named = set(_tree())
    unnamed = [p for p in _tracked() if p not in named and not p.endswith("__init__.py")]
    assert not unnamed, f"add these to docs/architecture.md's tree: {unnamed}"


def test_the_tree_describes_each_top_level_folder_of_tests() -> None:
    named = set(_tree())
    folders = sorted(
        f"tests/{p.name}/"
        for p in (ROOT / "tests").iterdir()
        if p.is_dir() and not p.name.startswith((".", "__"))
    )
    assert [f for f in folders if f not in named] == []


def test_the_tree_names_every_folder() -> None:
    """Every folder that holds tracked files is named in the tree, or lies inside a folder
    the tree describes whole (recorded test data, a vendored schema folder's own layout)."""
    named = set(_tree())
    whole = ("tests/contract/testdata/", "tests/unit/testdata/", "schemas/crossplane/")
    folders = sorted({p.rsplit("/", 1)[0] + "/" for p in _files() if "/" in p})
    unnamed = [f for f in folders if f not in named and not f.startswith(whole)]
    assert unnamed == [], f"name these folders in docs/architecture.md's tree: {unnamed}"
