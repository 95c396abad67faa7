"""One version, one registry: pyproject.toml's `[project] version` and `[tool.dot-inference]
registry` reach `dot-inference --version`, the Configuration's dependency on the function,
the Composition's functionRef and examples/functions.yaml; a release tag must be the version.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from conftest import PACKAGE, ROOT, load_yaml

from dot_inference import cli, release
from dot_inference.generate import render_files

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
VERSION = PYPROJECT["project"]["version"]


def test_the_version_and_registry_are_written_once_in_pyproject() -> None:
    assert release.settings() == (VERSION, PYPROJECT["tool"]["dot-inference"]["registry"])
    assert "version" not in (ROOT / "kcl" / "kcl.mod").read_text()
    assert "function_dot_inference" not in (ROOT / "kcl" / "versions.k").read_text()


def test_dot_inference_version_prints_it() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "dot_inference.cli", "--version"], capture_output=True, text=True
    )
    assert out.stdout.strip() == f"dot-inference, version {VERSION}"


def test_release_names_follow_the_registry() -> None:
    rel = release.release()
    assert rel.tag == f"v{VERSION}"
    assert rel.function_package == f"{rel.registry}/function-dot-inference"
    assert rel.configuration_package == f"{rel.registry}/dot-inference"
    assert rel.runtime_image == f"{rel.function_package}-runtime"
    assert rel.registry_host == rel.registry.split("/")[0]
    # What Crossplane's package manager names the dependency (as for crossplane-contrib's).
    assert rel.function_name == "devops-toolkit-function-dot-inference"
    assert (
        release.dependency_name("xpkg.crossplane.io/crossplane-contrib/function-kcl")
        == "crossplane-contrib-function-kcl"
    )


def test_generated_files_follow_the_version() -> None:
    rel = release.release()
    [config] = load_yaml(PACKAGE / "crossplane.yaml")
    [dep] = [d for d in config["spec"]["dependsOn"] if d["package"] == rel.function_package]
    assert dep["version"].startswith(f">={rel.tag},")
    functions = {f["metadata"]["name"]: f for f in load_yaml(ROOT / "examples" / "functions.yaml")}
    assert functions[rel.function_name]["spec"]["package"] == f"{rel.function_package}:{rel.tag}"
    [composition] = load_yaml(PACKAGE / "llminference" / "composition.yaml")
    refs = [s["functionRef"]["name"] for s in composition["spec"]["pipeline"]]
    assert rel.function_name in refs
    [meta] = load_yaml(ROOT / "function" / "package" / "crossplane.yaml")
    assert meta["metadata"]["name"] == rel.function_package.rsplit("/", 1)[1]


def _project(tmp_path: Path, version: str, registry: str) -> Path:
    """kcl/ with the files the generator reads, and a pyproject.toml of its own."""
    root = tmp_path / "project"
    shutil.copytree(ROOT / "kcl", root / "kcl")
    (root / "function" / "policy").mkdir(parents=True)
    for name in ("limits.yaml", "policy/llmd.yaml"):
        shutil.copy(ROOT / "function" / name, root / "function" / name)
    text = (ROOT / "pyproject.toml").read_text()
    text = text.replace(f'version = "{VERSION}"', f'version = "{version}"', 1)
    text = text.replace(f'registry = "{release.settings()[1]}"', f'registry = "{registry}"', 1)
    (root / "pyproject.toml").write_text(text)
    return root


def test_a_new_version_or_registry_moves_every_generated_reference(tmp_path: Path) -> None:
    root = _project(tmp_path, "1.2.3", "ghcr.io/acme")
    files = render_files(root / "kcl", schemas=ROOT / "schemas")
    config = yaml.safe_load(files["package/crossplane.yaml"])
    assert {
        "apiVersion": "pkg.crossplane.io/v1",
        "kind": "Function",
        "package": "ghcr.io/acme/function-dot-inference",
        "version": ">=v1.2.3, <v2.0.0",
    } in config["spec"]["dependsOn"]
    functions = list(yaml.safe_load_all(files["examples/functions.yaml"]))
    assert functions[0]["metadata"]["name"] == "acme-function-dot-inference"
    assert functions[0]["spec"]["package"] == "ghcr.io/acme/function-dot-inference:v1.2.3"
    composition = yaml.safe_load(files["package/llminference/composition.yaml"])
    assert "acme-function-dot-inference" in [
        s["functionRef"]["name"] for s in composition["spec"]["pipeline"]
    ]


@pytest.mark.parametrize(
    ("tag", "ok"),
    [
        (f"v{VERSION}", True),
        (f"refs/tags/v{VERSION}", True),
        (VERSION, False),  # tags carry the `v`
        ("v9.9.9", False),
        (f"v{VERSION}-rc.1", False),
    ],
)
def test_check_tag(tag: str, ok: bool) -> None:
    if ok:
        assert release.check_tag(tag) == f"v{VERSION}"
        return
    with pytest.raises(release.ReleaseError) as e:
        release.check_tag(tag)
    assert f"does not match the project's version {VERSION}" in str(e.value)
    assert f"push the tag v{VERSION}" in str(e.value)
    assert "git push --delete origin" in str(e.value) and "./task generate" in str(e.value)


@pytest.mark.parametrize(
    ("version", "registry", "message"),
    [
        ("1.0", "xpkg.upbound.io/acme", "is not X.Y.Z"),
        ("1.0.0", "acme", r"must be <host>\[:port\]/<organisation>"),
        ("1.0.0", "xpkg.upbound.io/acme/", "must be <host>"),
        ("1.0.0", "xpkg.upbound.io/acme:v1", "no tag: the version is added"),
        ("1.0.0", "xpkg.upbound.io/acme@sha256:00", "must be <host>"),
    ],
)
def test_bad_settings_are_refused(tmp_path: Path, version: str, registry: str, message: str):
    root = _project(tmp_path, version, registry)
    with pytest.raises(release.ReleaseError, match=message):
        release.settings(root)


def test_a_registry_with_a_port_is_a_registry(tmp_path: Path) -> None:
    root = _project(tmp_path, "1.0.0", "localhost:5000/acme")
    assert release.settings(root) == ("1.0.0", "localhost:5000/acme")
    assert release.dependency_name("localhost:5000/acme/function-dot-inference") == (
        "acme-function-dot-inference"
    )


def test_cli_release_commands() -> None:
    runner = CliRunner()
    info = runner.invoke(cli.cli, ["release", "info"])
    assert info.exit_code == 0
    values = dict(line.split("=", 1) for line in info.output.splitlines())
    assert values["tag"] == f"v{VERSION}" and values["version"] == VERSION
    one = runner.invoke(cli.cli, ["release", "info", "function_package"])
    assert one.output.strip() == values["function_package"]
    assert runner.invoke(cli.cli, ["release", "info", "nope"]).exit_code == 2
    assert runner.invoke(cli.cli, ["release", "check-tag", f"v{VERSION}"]).exit_code == 0
    refused = runner.invoke(cli.cli, ["release", "check-tag", "v9.9.9"])
    assert refused.exit_code == 1
    assert "does not match" in refused.output
