"""dot_inference.kcl_service: kcl-lib's ExecProgram through its C API, each result freed.

The reply must be kcl-lib's own (results and error texts byte for byte, which the function-kcl
parity tests compare with upstream's), and a process must not keep what it has read, which
kcl-lib's binding does."""

from __future__ import annotations

import importlib.metadata
import json
import re
import subprocess
import sys
import threading
from typing import Any

import pytest
from conftest import ROOT
from kcl_lib import api

from dot_inference import function_kcl, kcl_service

# About 2 MiB of reply (1 MiB of JSON, 1 MiB of YAML).
BIG = 'items = [{kind = "X", name = "n${i}", data = "x" * 1000} for i in range(1000)]\n'


def args(source: str, **kw: Any) -> api.ExecProgramArgs:
    return api.ExecProgramArgs(k_filename_list=["prog.k"], k_code_list=[source], **kw)


CASES = {
    "value": args("a = 1\nb = {c = [1, 2.5, None, True]}\n"),
    "option": args('a = option("p")\n', args=[api.Argument(name="p", value='{"x": [1]}')]),
    "list-stream": args("[{a = 1}, {b = 2}]\n"),
    "settings": args(
        "b = 2\na = {z = None, y = 1}\n_h = 3\n",
        overrides=["b=5"],
        path_selector=["a"],
        disable_none=True,
        sort_keys=True,
        show_hidden=True,
    ),
    "several-mb": args(BIG),
    "syntax-error": args("a = \n"),
    "check-failure": args(
        "schema S:\n    x: int\n    check:\n        x > 1, 'x too small'\ns = S {x = 0}\n"
    ),
    "assert": args('assert False, "boom"\n'),
    "type-error": args('a: int = "s"\n'),
    "undefined": args("a = b\n"),
    "missing-file": api.ExecProgramArgs(k_filename_list=["missing.k"]),
    "bad-override": args("a = 1\n", overrides=["=="]),
}


def outcome(exec_program: Any, exec_args: api.ExecProgramArgs) -> tuple[str, bytes | str]:
    try:
        return "result", exec_program(exec_args).SerializeToString(deterministic=True)
    except Exception as err:  # what function_kcl reads of an error: its text
        return "error", str(err)


@pytest.mark.parametrize("name", CASES)
def test_reply_is_kcl_libs(name: str) -> None:
    exec_args = CASES[name]
    ours = outcome(kcl_service.exec_program, exec_args)
    assert ours == outcome(api.API().exec_program, exec_args)


def test_errors_are_covered() -> None:
    """The table holds both kinds of reply: results, and error replies kcl-lib raises."""
    kinds = {outcome(kcl_service.exec_program, a)[0] for a in CASES.values()}
    assert kinds == {"result", "error"}


def test_the_checked_kcl_lib_is_installed_and_pinned() -> None:
    """The C signatures were read for KCL_LIB_VERSION: another kcl-lib needs them checked
    against its crates/api/src/service/capi.rs (kcl-lib's binding leaks meanwhile)."""
    pins = re.findall(r'"kcl-lib==([^"]+)"', (ROOT / "pyproject.toml").read_text())
    found = {"pyproject.toml": pins, "installed": [importlib.metadata.version("kcl-lib")]}
    assert found == {k: [kcl_service.KCL_LIB_VERSION] for k in found}
    assert kcl_service.native() is not None


def test_another_kcl_lib_goes_through_its_binding(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kcl_service, "KCL_LIB_VERSION", "0.0.0")
    monkeypatch.setattr(kcl_service, "_native", None)
    monkeypatch.setattr(kcl_service, "_native_checked", False)
    assert kcl_service.native() is None
    for name in ("value", "syntax-error"):
        ours = outcome(kcl_service.exec_program, CASES[name])
        assert ours == outcome(api.API().exec_program, CASES[name]), name


def test_threads_take_turns() -> None:
    """The library is not thread safe and ctypes releases the GIL: calls are serialized."""
    expected = {n: outcome(kcl_service.exec_program, CASES[n]) for n in ("value", "option")}
    got: list[tuple[str, tuple[str, bytes | str]]] = []

    def work(name: str) -> None:
        for _ in range(5):
            got.append((name, outcome(kcl_service.exec_program, CASES[name])))

    threads = [threading.Thread(target=work, args=(n,)) for n in ("value", "option") * 2]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 20
    assert all(result == expected[name] for name, result in got)


# Resident memory over CALLS runs of BIG (2 MiB of reply each) in a fresh process, after a
# warm-up: allocator noise is a few MiB, a kept reply 2 MiB a call.
CALLS = 12
_MEASURE = """
import gc, json, sys
import kcl_lib.api as api
from dot_inference import function_kcl
source = sys.argv[2]
if sys.argv[1] == "execute_kcl":
    call = lambda: function_kcl.execute_kcl(source, {})
else:
    exec_args = api.ExecProgramArgs(k_filename_list=["prog.k"], k_code_list=[source])
    call = lambda: api.API().exec_program(exec_args)
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
for _ in range(3):
    call()
gc.collect()
before = rss()
for _ in range(int(sys.argv[3])):
    call()
gc.collect()
print(json.dumps(rss() - before))
"""


def _growth_mib(path: str) -> float:
    run = subprocess.run(
        [sys.executable, "-c", _MEASURE, path, BIG, str(CALLS)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return json.loads(run.stdout) / 1024


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
@pytest.mark.parametrize(
    ("path", "low", "high"),
    [
        # function_kcl's KCL step: flat.
        ("execute_kcl", -1000.0, 6.0),
        # kcl-lib's binding keeps every reply (if this fails, kcl-lib frees them now).
        ("kcl-lib", 15.0, 1000.0),
    ],
)
def test_resident_memory_over_calls(path: str, low: float, high: float) -> None:
    assert low <= _growth_mib(path) <= high


def test_the_kcl_step_reads_through_kcl_service(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str]] = []

    def spy(exec_args: api.ExecProgramArgs) -> Any:
        seen.append(list(exec_args.k_code_list))
        return api.API().exec_program(exec_args)

    monkeypatch.setattr(kcl_service, "exec_program", spy)
    assert function_kcl.execute_kcl("items = [{a = 1}]\n", {}) == [{"a": 1}]
    assert seen == [["items = [{a = 1}]\n"]]
