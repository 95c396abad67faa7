"""The function's packages import one way, and no module outgrows one concern.

Each row is a layer and the packages it may not import: what a claim says and what a model
needs (spec, model/, cluster/, plan/, policy/) never depend on how a backend builds it;
a backend never reaches back into the pipeline; and nothing but the pipeline knows the
backends' registry. No import cycle, in function/ or dot_inference/: a module's imports (at
any depth of it, outside `if TYPE_CHECKING:`) never lead back to it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from conftest import ROOT

FUNCTION = ROOT / "function"
TOOLING = ROOT / "dot_inference"
MAX_LINES = 600

# (modules, by path prefix under function/) -> imports they must not make
RULES = [
    (
        "the claim and the plan never import a backend",
        (
            "claim/",
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


def _modules(root: Path = FUNCTION) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if "package" not in p.parts)


def _imports(path: Path, runtime: bool = False) -> set[str]:
    """Every module an import statement of `path` names, at any depth (a function's own
    import runs too); with `runtime`, not those under `if TYPE_CHECKING:`, which never run."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if runtime and isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            if isinstance(child, ast.ImportFrom) and child.module and not child.level:
                found.add(child.module)
                found.update(f"{child.module}.{a.name}" for a in child.names)
            elif isinstance(child, ast.Import):
                found.update(a.name for a in child.names)
            visit(child)

    visit(ast.parse(path.read_text()))
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


@pytest.mark.parametrize("root", [FUNCTION, TOOLING], ids=["function", "dot_inference"])
def test_no_module_is_over_600_lines(root: Path) -> None:
    sizes = {str(p.relative_to(ROOT)): len(p.read_text().splitlines()) for p in _modules(root)}
    assert {p: n for p, n in sizes.items() if n > MAX_LINES} == {}


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_cycles(paths: list[Path], root: Path = ROOT) -> list[list[str]]:
    """Every set of modules that import one another round a loop (the strongly connected sets
    of more than one, Tarjan's algorithm); modules are named from `root`."""
    names = {_module_name(p, root): p for p in paths}
    graph = {n: (_imports(p, runtime=True) & set(names)) - {n} for n, p in names.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while (w := stack.pop()) != v:
                group.append(w)
            if group:
                cycles.append(sorted([v, *group]))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return cycles


def test_no_import_cycle() -> None:
    paths = _modules(FUNCTION) + _modules(TOOLING)
    assert import_cycles(paths) == []


def test_the_cycle_check_finds_a_cycle(tmp_path: Path) -> None:
    """The check itself: two modules that import each other, one through a function's own
    import, are a cycle; a TYPE_CHECKING import is not."""
    files = {
        "a.py": "import probe.b\n",
        "b.py": "def f():\n    from probe.a import x\n",
        "c.py": "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    import probe.a\n",
        "d.py": "import probe.c\n",
    }
    (tmp_path / "probe").mkdir()
    for name, text in files.items():
        (tmp_path / "probe" / name).write_text(text)
    paths = sorted((tmp_path / "probe").glob("*.py"))
    assert import_cycles(paths, tmp_path) == [["probe.a", "probe.b"]]


def test_every_backend_is_registered_once() -> None:
    """Each module under function/backends/ that defines a BACKEND is in the registry, and
    the last one asked builds whatever the others do not (a claim always finds a backend)."""
    from function.backends import production_stack, registry
    from function.claim.spec import parse
    from function.limits import GpuShape
    from function.model import sizing

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
