"""Renovate sees every pin once, where it is written, and nothing in generated files.

Runs Renovate's own extraction (dot_inference/renovate.py: the Renovate release
tools/renovate/package.json pins, with ``--platform=local --dry-run=extract``, after
``renovate-config-validator --strict`` on renovate.json) on a throwaway git repository holding
the files Renovate reads here: Renovate only reads committed files, so the working tree's
copies are committed there, uncommitted edits included. The first run installs Node and
Renovate from npm (a few minutes); later runs take seconds. Where npm cannot install them
the tests skip with npm's message.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tomllib
from collections import Counter
from pathlib import Path
from typing import NamedTuple

import pytest

from dot_inference import pins, renovate
from dot_inference.renovate import Dep

ROOT = Path(__file__).resolve().parents[2]
# Set by the `ci` workflow: there npm can install Renovate, so a skip would hide a failure.
REQUIRE_ENV = "DOT_INFERENCE_REQUIRE_RENOVATE"
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
    ".github",
    "devbox.json",
    "tools/renovate",
)
GENERATED = (
    "package/",
    "function/package/",
    "install/",
    "examples/functions.yaml",
    "examples/manifests/",
)


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
    try:
        return renovate.extract(repo)
    except renovate.NotInstallable as e:
        if os.environ.get(REQUIRE_ENV):
            pytest.fail(f"Renovate could not be installed, and {REQUIRE_ENV} is set: {e}")
        pytest.skip(f"Renovate could not be installed here: {e}")


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
    """A version is written once; a GitHub Action used by several steps is the exception,
    and then every step uses the same release and digest (Renovate moves them together)."""
    counts = Counter((d.datasource, d.dep_name) for d in deps if d.manager != "github-actions")
    twice = sorted(f"{ds} {name}" for (ds, name), n in counts.items() if n > 1)
    assert not twice, f"pinned in more than one place: {twice}"
    actions: dict[str, set[tuple[str, str]]] = {}
    for d in deps:
        if d.manager == "github-actions":
            actions.setdefault(d.dep_name, set()).add((d.current_value, d.current_digest))
    assert {a: v for a, v in actions.items() if len(v) > 1} == {}


# `uses: owner/repo@<40-hex commit> # v<version>` (a step's action, or a local ./ path).
_USES = re.compile(r"^\s*(?:-\s+)?uses:\s*(\S+?)(?:@(\S+))?(?:\s+#\s*(\S+))?\s*$")


def uses_lines() -> list[tuple[str, str, str, str]]:
    """(file, action, ref, version comment) of every `uses:` under .github."""
    out = []
    for path in sorted((ROOT / ".github").rglob("*.y*ml")):
        for line in path.read_text().splitlines():
            m = _USES.match(line)
            if m:
                rel = path.relative_to(ROOT).as_posix()
                out.append((rel, m.group(1), m.group(2) or "", m.group(3) or ""))
    return out


USES = uses_lines()


def test_workflows_use_actions() -> None:
    assert len({u[1] for u in USES}) >= 8, USES


@pytest.mark.parametrize("use", USES, ids=lambda u: f"{u[0]}:{u[1]}")
def test_every_action_is_pinned_by_commit_with_its_version(use: tuple[str, str, str, str]) -> None:
    file, action, ref, comment = use
    if action.startswith("./"):
        assert (ROOT / action / "action.yml").is_file(), f"{file}: no local action {action}"
        return
    assert re.fullmatch(r"[0-9a-f]{40}", ref), f"{file}: {action}@{ref} is not a commit"
    assert re.fullmatch(r"v\d+(\.\d+){0,2}", comment), f"{file}: {action} has no `# vX.Y.Z`"


@pytest.mark.parametrize(
    "use", [u for u in USES if not u[1].startswith("./")], ids=lambda u: f"{u[0]}:{u[1]}"
)
def test_renovate_tracks_every_action(deps: list[Dep], use: tuple[str, str, str, str]) -> None:
    file, action, ref, comment = use
    found = {
        (d.current_value, d.current_digest)
        for d in deps
        if d.manager == "github-actions" and d.file == file and d.dep_name == action
    }
    # Offline, Renovate cannot look GitHub up ("github-token-required"): it still reads the
    # pin, which is what it would move.
    assert found == {(comment, ref)}, found


DEVBOX = pins.devbox_packages()


@pytest.mark.parametrize(("package", "version"), sorted(DEVBOX.items()))
def test_renovate_tracks_every_devbox_tool(deps: list[Dep], package: str, version: str) -> None:
    found = [d for d in deps if d.manager == "devbox" and d.dep_name == package]
    assert [(d.current_value, d.skip_reason) for d in found] == [(version, "")]


def test_renovate_tracks_the_devbox_cli_and_its_own_pins(deps: list[Dep]) -> None:
    devbox = [d for d in deps if d.dep_name == "jetify-com/devbox"]
    assert [(d.file, d.datasource) for d in devbox] == [
        (".github/actions/setup/action.yml", "github-releases")
    ]
    pinned = json.loads((ROOT / "tools" / "renovate" / "package.json").read_text())
    npm = {d.dep_name: d.current_value for d in deps if d.manager == "npm"}
    assert npm == pinned["dependencies"]


def test_pins_sharing_a_vendored_folder_are_bumped_together() -> None:
    """A provider family's packages share one folder of schemas/: a renovate.json rule groups
    exactly their packages, so one change moves them all (and ./task vendor then runs)."""
    from dot_inference import vendor

    depname = {a.variable: a.dep_name for a in ANNOTATIONS}
    rules = json.loads(RENOVATE_JSON.read_text())["packageRules"]
    groups = [set(r["matchDepNames"]) for r in rules if r.get("groupName")]
    for folder in vendor.folders():
        shared = [p.split(":", 1)[1] for p in vendor.load(folder).pins]
        if len(shared) > 1:
            assert {depname[v] for v in shared} in groups, folder


def test_ci_python_is_not_moved(deps: list[Dep]) -> None:
    rules = json.loads(RENOVATE_JSON.read_text())["packageRules"]
    assert any(
        r.get("matchManagers") == ["github-actions"]
        and r.get("matchDepNames") == ["python"]
        and r.get("enabled") is False
        for r in rules
    )
    found = [
        d.current_value for d in deps if d.manager == "github-actions" and d.dep_name == "python"
    ]
    assert found == ["3.11"]


def test_task_is_the_same_release_in_both_places() -> None:
    """Task is pinned as go-task-bin (what ./task runs) and go-task (devbox.json); a
    renovate.json rule groups the two."""
    assert DEVBOX["go-task"] == dict(PINS)["go-task-bin"]
    rules = json.loads(RENOVATE_JSON.read_text())["packageRules"]
    assert any(set(r.get("matchDepNames", [])) == {"go-task", "go-task-bin"} for r in rules)


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
