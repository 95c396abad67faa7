"""The InferenceCluster reconcile-time program (`kcl/inferencecluster/program/`): its KCL unit
tests (`*_test.k`, run one by one through kcl-lib's test runner) and the rules that keep it a
single inline function-kcl source.

kcl-lib's test runner writes `_kcl_test_*.k` into the package it tests, so the tests run on a
copy of the program: the source tree stays clean even when a test run dies half way.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from conftest import ROOT
from kcl_lib import api

PROGRAM = ROOT / "kcl" / "inferencecluster" / "program"
PROGRAM_FILES = sorted(
    p for p in PROGRAM.glob("*.k") if not p.name.endswith("_test.k") and not p.name.startswith("_")
)
TEST_FILES = sorted(PROGRAM.glob("*_test.k"))
TEST_NAMES = sorted(
    m.group(1)
    for f in TEST_FILES
    for m in re.finditer(r"^(test_\w+)\s*=\s*lambda\b", f.read_text(), re.MULTILINE)
)
ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture(scope="module")
def program_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dst = tmp_path_factory.mktemp("kcl") / "program"
    shutil.copytree(PROGRAM, dst, ignore=shutil.ignore_patterns("_kcl_test_*"))
    return dst


def test_there_are_kcl_unit_tests() -> None:
    assert len(TEST_NAMES) >= 10, f"expected the program's KCL unit tests, found {TEST_NAMES}"
    assert len(TEST_NAMES) == len(set(TEST_NAMES)), "KCL test names must be unique"


@pytest.mark.parametrize("name", TEST_NAMES)
def test_kcl(name: str, program_copy: Path) -> None:
    try:
        result = api.API().test(
            api.TestArgs(pkg_list=[str(program_copy)], run_regexp=f"^{name}$", fail_fast=True)
        )
    except Exception as e:  # kcl-lib raises on compile errors
        pytest.fail(f"the program or its tests do not compile:\n{ANSI.sub('', str(e))}")
    ran = {i.name: i.error for i in result.info}
    assert name in ran, f"kcl test did not run {name} (ran {sorted(ran)})"
    assert not ran[name], f"{name} failed:\n{ANSI.sub('', ran[name])}"


def _top_level_names(path: Path) -> set[str]:
    return set(re.findall(r"^(\w+)\s*=", path.read_text(), re.MULTILINE))


def _lambda_locals(path: Path) -> set[str]:
    # Every indented `name =`: lambda locals, and config keys (which only clash with a
    # top-level name by mistake too).
    return set(re.findall(r"^[ \t]+(\w+)\s*=[^=]", path.read_text(), re.MULTILINE))


def test_lambda_locals_never_reuse_a_top_level_name() -> None:
    """KCL assigns a lambda's local to the package variable of the same name (kcl-lib
    0.13): a local `_release` inside a lambda would replace the `_release` builder for
    every later call. Program and test locals must use names no file defines at top level."""
    top = set().union(*(_top_level_names(p) for p in [*PROGRAM_FILES, *TEST_FILES]))
    clashes = {
        p.name: sorted(_lambda_locals(p) & top)
        for p in [*PROGRAM_FILES, *TEST_FILES]
        if _lambda_locals(p) & top
    }
    assert not clashes, f"lambda locals shadow top-level names: {clashes}"


def test_only_items_is_public() -> None:
    """function-kcl reads `items`; every other top-level name of the program is private."""
    public = {
        name: p.name
        for p in PROGRAM_FILES
        for name in _top_level_names(p)
        if not name.startswith("_") and name != "items"
    }
    assert not public, f"public top-level names besides items: {public}"


def test_program_imports_only_system_modules() -> None:
    system = {"json", "yaml", "math", "regex", "base64", "units", "datetime", "file", "crypto"}
    imports = {
        m.group(1): p.name
        for p in PROGRAM_FILES
        for m in re.finditer(r"^import\s+([\w.]+)", p.read_text(), re.MULTILINE)
    }
    assert set(imports) <= system, (
        f"the inline program may import KCL system modules only: {imports}"
    )


def test_program_files_are_ascii() -> None:
    """The program is embedded in the generated Composition as one YAML string."""
    for p in PROGRAM_FILES:
        assert p.read_text().isascii(), f"{p.name} has non-ASCII characters"


def test_program_without_xr_composes_nothing(tmp_path: Path) -> None:
    """The program as function-kcl runs it (one inline source) evaluates with no params."""
    order = re.search(
        r"_programFiles\s*=\s*\[([^\]]*)\]",
        (ROOT / "kcl" / "inferencecluster" / "composition.k").read_text(),
    )
    assert order, "composition.k lists the program files in _programFiles"
    names = re.findall(r'"([^"]+)"', order.group(1))
    assert sorted(names) == sorted(p.name for p in PROGRAM_FILES)
    prog = tmp_path / "prog.k"
    prog.write_text("\n".join((PROGRAM / n).read_text() for n in names))
    result = api.API().exec_program(
        api.ExecProgramArgs(k_filename_list=[str(prog)], work_dir=str(tmp_path))
    )
    assert not result.err_message, result.err_message
    assert result.yaml_result.strip() == "items: []"
