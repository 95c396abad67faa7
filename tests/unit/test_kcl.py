"""KCL sources: formatted with KCL's own formatter, and their `test_*` lambdas pass
(`kcl test` semantics through kcl-lib). The InferenceCluster program's tests run in
test_kcl_unit.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import ROOT
from kcl_lib import api

KCL = ROOT / "kcl"
KCL_FILES = sorted(p for p in KCL.rglob("*.k") if not p.name.startswith("_kcl_test_"))


@pytest.mark.parametrize("path", KCL_FILES, ids=[p.relative_to(KCL).as_posix() for p in KCL_FILES])
def test_kcl_file_is_formatted(path: Path) -> None:
    source = path.read_text()
    formatted = api.API().format_code(api.FormatCodeArgs(source=source)).formatted.decode()
    assert formatted == source, f"{path.relative_to(ROOT)} is not formatted: run ./task format"


KCL_TEST_PACKAGES = ["meta"]


@pytest.mark.parametrize("package", KCL_TEST_PACKAGES)
def test_kcl_unit_tests_pass(package: str) -> None:
    result = api.API().test(
        api.TestArgs(
            pkg_list=[f"{KCL / package}/..."], exec_args=api.ExecProgramArgs(work_dir=str(KCL))
        )
    )
    assert result.info, f"no KCL tests found in {package}"
    failures = {i.name: i.error for i in result.info if i.error}
    assert not failures, "\n\n".join(f"{k}:\n{v}" for k, v in failures.items())
