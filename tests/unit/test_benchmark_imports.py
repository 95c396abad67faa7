"""The benchmarks import the function's modules lazily, inside each bench: every name they
import must still exist where they import it from, or `./task bench` breaks unseen after a
module moves (the suite never runs the benchmarks)."""

from __future__ import annotations

import ast
import importlib

import pytest
from conftest import ROOT

SCRIPTS = sorted((ROOT / "benchmarks").glob("*.py"))


def _imports() -> list[tuple[str, int, str, str]]:
    found = []
    for path in SCRIPTS:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                ("function", "dot_inference")
            ):
                found += [(path.name, node.lineno, node.module or "", a.name) for a in node.names]
    return found


@pytest.mark.parametrize(("script", "line", "module", "name"), _imports())
def test_every_name_a_benchmark_imports_exists(script: str, line: int, module: str, name: str):
    imported = importlib.import_module(module)
    if not hasattr(imported, name):
        importlib.import_module(f"{module}.{name}")  # a submodule


def test_the_benchmarks_import_the_function() -> None:
    assert len(_imports()) > 10
