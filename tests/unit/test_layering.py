"""The function's packages import one way, and no module outgrows one concern.

Each row is a layer and the packages it may not import: what a claim says and what a model
needs (spec, model/, cluster/, plan/, policy/) never depend on how a backend builds it;
a backend never reaches back into the pipeline; and nothing but the pipeline knows the
backends' registry."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from conftest import ROOT

FUNCTION = ROOT / "function"
MAX_LINES = 600

# (modules, by path prefix under function/) -> imports they must not make
RULES = [
    (
        "the claim and the plan never import a backend",
        (
            "spec.py",
            "outcome.py",
            "keys.py",
            "kube.py",
            "model/",
            "cluster/",
            "plan/",
            "policy/",
            "limits.py",
            "errors.py",
            "datafile.py",
        ),
        ("function.backends", "function.compose", "function.status", "function.fleet"),
    ),
    (
        "the fleet composes placements, never a backend's objects",
        ("fleet/",),
        (
            "function.compose",
            "function.backends.registry",
            "function.backends.production_stack",
            "function.backends.multinode",
            "function.backends.simulator",
            "function.backends.llmd",
        ),
    ),
    (
        "a backend never imports the pipeline",
        ("backends/",),
        (
            "function.compose",
            "function.status",
            "function.cluster.place",
            "function.cluster.resolve",
        ),
    ),
    (
        "only the pipeline knows the registry",
        ("backends/", "status.py", "model/", "cluster/", "plan/", "policy/", "fleet/"),
        ("function.backends.registry",),
    ),
    (
        "the status stage reads a backend's Engine only",
        ("status.py",),
        (
            "function.backends.production_stack",
            "function.backends.multinode",
            "function.backends.simulator",
            "function.backends.llmd",
            "function.backends.common",
            "function.backends.cache",
        ),
    ),
]


def _modules() -> list[Path]:
    return sorted(p for p in FUNCTION.rglob("*.py") if "package" not in p.parts)


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return found


@pytest.mark.parametrize(("rule", "layer", "forbidden"), RULES, ids=[r[0] for r in RULES])
def test_imports_run_one_way(rule: str, layer: tuple[str, ...], forbidden: tuple[str, ...]) -> None:
    wrong = {
        str(p.relative_to(ROOT)): sorted(
            i for i in _imports(p) if any(i == f or i.startswith(f + ".") for f in forbidden)
        )
        for p in _modules()
        if p.relative_to(FUNCTION).as_posix().startswith(layer)
    }
    assert {k: v for k, v in wrong.items() if v} == {}, rule


def test_the_rules_see_every_layer() -> None:
    """A rule whose prefixes match nothing would pass for ever."""
    for rule, layer, _ in RULES:
        matched = [p for p in _modules() if p.relative_to(FUNCTION).as_posix().startswith(layer)]
        assert matched, rule


def test_no_module_is_over_600_lines() -> None:
    sizes = {str(p.relative_to(ROOT)): len(p.read_text().splitlines()) for p in _modules()}
    assert {p: n for p, n in sizes.items() if n > MAX_LINES} == {}


def test_every_backend_is_registered_once() -> None:
    """Each module under function/backends/ that defines a BACKEND is in the registry, and
    the last one asked builds whatever the others do not (a claim always finds a backend)."""
    from function.backends import production_stack, registry
    from function.limits import GpuShape
    from function.model import sizing
    from function.spec import parse

    defined = {
        p.relative_to(FUNCTION).as_posix()
        for p in (FUNCTION / "backends").rglob("*.py")
        if any(
            isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "BACKEND" for t in n.targets)
            for n in ast.parse(p.read_text()).body
        )
    }
    assert len(defined) == len(registry.BACKENDS) == len({b.build for b in registry.BACKENDS})
    assert registry.BACKENDS[-1] is production_stack.BACKEND
    claim = {"metadata": {"name": "m", "namespace": "a"}, "spec": {"parameters": {"model": "x/y"}}}
    one = sizing.plan_without_facts(1, GpuShape(80.0, 8, "h100", False))
    assert [b.serves(parse(claim), one) for b in registry.BACKENDS] == [False, False, False, True]


# Modules that import transformers start fast without it: it is imported inside the function
# that reads a Hub config (function/model/hf_config.py), on the first one.
STARTUP = ["function.fn", "function.main", "dot_inference.cli"]


@pytest.mark.parametrize("module", STARTUP)
def test_starting_up_does_not_import_transformers(module: str) -> None:
    import subprocess
    import sys

    heavy = "('transformers', 'torch')"
    code = f"import sys, {module}; print(sorted(m for m in {heavy} if m in sys.modules))"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]", done.stderr


def test_only_hf_config_imports_transformers() -> None:
    found = [
        p.relative_to(FUNCTION).as_posix()
        for p in _modules()
        if any(m == "transformers" or m.startswith("transformers.") for m in _imports(p))
    ]
    assert found == ["model/hf_config.py"]
