"""Renovate sees every pin once, where it is written, and nothing in generated files.

Runs Renovate's own extraction (``../shared/tools/renovate-extract``: Renovate 44 with
``--platform=local --dry-run=extract``, after ``renovate-config-validator --strict`` on
renovate.json) on a throwaway git repository holding the files Renovate reads here: Renovate
only reads committed files, so the working tree's copies are committed there, uncommitted
edits included. The first run installs Node 24 and Renovate 44 from npm (a few minutes);
later runs take seconds. Without npm the tests skip with the tool's message.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tomllib
from collections import Counter
from pathlib import Path
from typing import NamedTuple

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOOL = Path(__file__).resolve().parents[3] / "shared" / "tools" / "renovate-extract"
VERSIONS = ROOT / "kcl" / "versions.k"
RENOVATE_JSON = ROOT / "renovate.json"

# What Renovate must see (sources) and what it must not report (generated from kcl/).
COPIED = (
    "renovate.json",
    "kcl",
    "pyproject.toml",
    "Dockerfile",
    "package",
    "examples",
    "function/package",
    "install",
)
GENERATED = (
    "package/",
    "function/package/",
    "install/",
    "examples/functions.yaml",
    "examples/manifests/",
)


class Dep(NamedTuple):
    manager: str
    file: str
    dep_name: str
    datasource: str
    registry: str
    current_value: str
    skip_reason: str


class Annotation(NamedTuple):
    variable: str
    dep_name: str
    datasource: str
    registry_url: str
    value: str
    comment: str  # the comment lines above the pin, the annotation included
    # A commit pin (git-refs): the branch Renovate follows; the value is then the commit.
    branch: str = ""


_ASSIGNMENT = re.compile(r'^(\w+)\s*=\s*"([^"]*)"\s*$')


def annotations(text: str | None = None) -> list[Annotation]:
    """`# renovate: key=value ...` comments of kcl/versions.k and the pin on the next line,
    read independently of renovate.json's regular expression."""
    lines = (text if text is not None else VERSIONS.read_text()).splitlines()
    out = []
    for i, line in enumerate(lines):
        stripped = line.strip()
        if not stripped.startswith("#") or "renovate:" not in stripped:
            continue
        fields = dict(
            kv.split("=", 1) for kv in stripped.split("renovate:", 1)[1].split() if "=" in kv
        )
        m = _ASSIGNMENT.match(lines[i + 1].strip()) if i + 1 < len(lines) else None
        assert m, f'kcl/versions.k line {i + 2}: no `name = "version"` below the annotation'
        start = i
        while start > 0 and lines[start - 1].strip().startswith("#"):
            start -= 1
        out.append(
            Annotation(
                variable=m.group(1),
                dep_name=fields.get("depName", ""),
                datasource=fields.get("datasource", ""),
                registry_url=fields.get("registryUrl", ""),
                value=m.group(2),
                comment="\n".join(lines[start : i + 1]),
                branch=fields.get("currentValue", ""),
            )
        )
    return out


ANNOTATIONS = annotations()


def python_pins() -> list[tuple[str, str]]:
    """(name, version) of every `name==version` requirement in pyproject.toml."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(project.get("dependencies") or [])
    for extra in (project.get("optional-dependencies") or {}).values():
        reqs.extend(extra)
    pins = []
    for req in reqs:
        m = re.match(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?\s*==\s*([^\s;,]+)", req)
        if m:
            pins.append((m.group(1), m.group(3)))
    return pins


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=renovate-test", "-c", "user.email=renovate-test@invalid", *args],
        cwd=repo,
        check=True,
        capture_output=True,
    )


@pytest.fixture(scope="module")
def deps(tmp_path_factory: pytest.TempPathFactory) -> list[Dep]:
    """Renovate's extraction, run once for the module."""
    if not TOOL.is_file():
        pytest.skip(f"{TOOL} is not beside the repository")
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path_factory.mktemp("renovate-repo")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache")
    for rel in COPIED:
        src = ROOT / rel
        if src.is_dir():
            shutil.copytree(src, repo / rel, ignore=ignore)
        elif src.is_file():
            (repo / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, repo / rel)
    _git(repo, "init", "--quiet")
    _git(repo, "add", "--all")
    _git(repo, "commit", "--quiet", "--message", "working tree")
    proc = subprocess.run(
        [str(TOOL), str(repo)], capture_output=True, text=True, timeout=1800, check=False
    )
    if proc.returncode == 2:
        pytest.skip(f"renovate-extract could not install Renovate: {proc.stderr.strip()}")
    assert proc.returncode == 0, f"renovate-extract failed:\n{proc.stderr}"
    lines = proc.stdout.splitlines()
    assert lines and lines[0].startswith("manager\t"), proc.stdout
    rows = []
    for line in lines[1:]:
        cells = line.split("\t")
        cells += [""] * (len(Dep._fields) - len(cells))
        rows.append(Dep(*cells[: len(Dep._fields)]))
    return rows


def test_versions_file_has_annotations() -> None:
    assert len(ANNOTATIONS) >= 10
    assert all(a.dep_name and a.datasource and a.value for a in ANNOTATIONS)


@pytest.mark.parametrize("pin", ANNOTATIONS, ids=[a.variable for a in ANNOTATIONS])
def test_every_annotated_pin_is_found_once(deps: list[Dep], pin: Annotation) -> None:
    found = [d for d in deps if d.file == "kcl/versions.k" and d.dep_name == pin.dep_name]
    assert len(found) == 1, f"{pin.variable}: Renovate found {found}"
    dep = found[0]
    if pin.branch:
        # A commit pin: Renovate reports the branch it follows; the value is the commit.
        assert re.fullmatch(r"[0-9a-f]{40}", pin.value), f"{pin.variable}: not a commit"
        assert (dep.datasource, dep.current_value) == (pin.datasource, pin.branch)
        return
    assert (dep.datasource, dep.current_value) == (pin.datasource, pin.value)
    if pin.registry_url:
        assert dep.registry == pin.registry_url


def test_nothing_else_in_the_versions_file(deps: list[Dep]) -> None:
    reported = {d.dep_name for d in deps if d.file == "kcl/versions.k"}
    assert reported == {a.dep_name for a in ANNOTATIONS}


def test_no_dependency_is_reported_twice(deps: list[Dep]) -> None:
    counts = Counter((d.datasource, d.dep_name) for d in deps)
    twice = sorted(f"{ds} {name}" for (ds, name), n in counts.items() if n > 1)
    assert not twice, f"pinned in more than one place: {twice}"


def test_nothing_from_generated_files(deps: list[Dep]) -> None:
    generated = [d for d in deps if d.file.startswith(GENERATED)]
    assert not generated, generated


PINS = python_pins()


@pytest.mark.parametrize(("name", "version"), PINS, ids=[n for n, _ in PINS])
def test_every_python_pin_is_found_by_pep621(deps: list[Dep], name: str, version: str) -> None:
    found = [
        d
        for d in deps
        if d.manager == "pep621"
        and d.file == "pyproject.toml"
        and _normalize(d.dep_name) == _normalize(name)
    ]
    assert [d.current_value for d in found] == [f"=={version}"], found


_TAG_FORMAT = re.compile(r"`([A-Za-z0-9._-]+)<version>`")


def _extract_version_rules(dep: Annotation) -> list[str]:
    config = json.loads(RENOVATE_JSON.read_text())
    out = []
    for rule in config.get("packageRules") or []:
        names = rule.get("matchDepNames") or rule.get("matchPackageNames") or []
        sources = rule.get("matchDatasources") or [dep.datasource]
        if dep.dep_name in names and dep.datasource in sources and rule.get("extractVersion"):
            out.append(rule["extractVersion"])
    return out


@pytest.mark.parametrize(
    "pin",
    [a for a in ANNOTATIONS if _TAG_FORMAT.search(a.comment)],
    ids=lambda a: a.variable,
)
def test_tag_prefixes_are_stripped(pin: Annotation) -> None:
    """A pin whose comment says its tags read `<prefix><version>` has a renovate.json rule
    whose extractVersion turns that tag back into the pinned version."""
    m = _TAG_FORMAT.search(pin.comment)
    assert m
    tag = f"{m.group(1)}{pin.value}"
    rules = _extract_version_rules(pin)
    assert rules, f"{pin.variable}: no packageRule with extractVersion for {pin.dep_name}"
    for rule in rules:
        # Renovate's named groups are JavaScript's `(?<name>...)`; Python spells `(?P<name>`.
        got = re.match(rule.replace("(?<", "(?P<"), tag)
        assert got and got.group("version") == pin.value, f"{rule} on {tag}"
