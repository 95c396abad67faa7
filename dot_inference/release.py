"""The project's one version and the registry its release goes to, and the names derived
from them.

Both are written once, in pyproject.toml: `[project] version` (what `dot-inference
--version` prints and the wheel in the function image carries) and `[tool.dot-inference]
registry`. `./task generate` passes them to kcl/ (the Configuration's dependency on the
function, the Composition's functionRef, examples/functions.yaml), and the release tasks
read them here (`dot-inference release info`), so a release builds the image and both
packages from one version and refuses a tag that differs from it.
"""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import asdict, dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
# Semantic version, as Crossplane's package manager reads tags (Masterminds semver).
_SEMVER = re.compile(r"^\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?$")


class ReleaseError(Exception):
    """The version or registry is missing or malformed, or a tag does not match."""


@dataclass(frozen=True)
class Release:
    version: str  # 0.1.0
    tag: str  # v0.1.0: the git tag, image tag and package tag
    registry: str  # xpkg.upbound.io/devops-toolkit
    registry_host: str  # xpkg.upbound.io (with its port, if any): what a login names
    function_package: str  # <registry>/function-dot-inference
    configuration_package: str  # <registry>/dot-inference
    runtime_image: str  # <registry>/function-dot-inference-runtime: the function image alone
    function_name: str  # the name Crossplane gives the function dependency

    def env(self) -> str:
        """KEY=value lines (a workflow appends them to $GITHUB_OUTPUT)."""
        return "".join(f"{k}={v}\n" for k, v in asdict(self).items())


def settings(root: Path = ROOT) -> tuple[str, str]:
    """(version, registry) from pyproject.toml."""
    data = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    version = str((data.get("project") or {}).get("version") or "")
    registry = str(((data.get("tool") or {}).get("dot-inference") or {}).get("registry") or "")
    if not _SEMVER.match(version):
        raise ReleaseError(f"pyproject.toml: [project] version {version!r} is not X.Y.Z")
    host, _, path = registry.partition("/")
    if not host or not path or path.endswith("/") or ":" in path or "@" in registry:
        raise ReleaseError(
            f"pyproject.toml: [tool.dot-inference] registry {registry!r} must be "
            "<host>[:port]/<organisation>, e.g. xpkg.upbound.io/devops-toolkit or "
            "localhost:5000/acme (no tag: the version is added)"
        )
    return version, registry


def dependency_name(package: str) -> str:
    """The name Crossplane's package manager gives a dependency: the repository path without
    the registry host, `/` turned into `-` (xpkg.crossplane.io/crossplane-contrib/function-kcl
    is crossplane-contrib-function-kcl)."""
    return "-".join(package.split("/")[1:])


def _meta_name(path: Path) -> str:
    meta = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    name = (meta.get("metadata") or {}).get("name")
    if not name:
        raise ReleaseError(f"{path}: no metadata.name (run ./task generate)")
    return str(name)


def release(root: Path = ROOT) -> Release:
    version, registry = settings(root)
    function = f"{registry}/{_meta_name(root / 'function' / 'package' / 'crossplane.yaml')}"
    return Release(
        version=version,
        tag=f"v{version}",
        registry=registry,
        registry_host=registry.split("/", 1)[0],
        function_package=function,
        configuration_package=f"{registry}/{_meta_name(root / 'package' / 'crossplane.yaml')}",
        runtime_image=f"{function}-runtime",
        function_name=dependency_name(function),
    )


def check_tag(tag: str, root: Path = ROOT) -> str:
    """The release for `tag`, or ReleaseError when the tag is not `v<version>`."""
    rel = release(root)
    name = tag.removeprefix("refs/tags/")
    if name != rel.tag:
        raise ReleaseError(
            f"tag {name!r} does not match the project's version {rel.version} "
            f"(pyproject.toml [project] version): nothing was released. Either push the tag "
            f"{rel.tag}, or delete this tag (git push --delete origin {name}), set the version "
            f"to {name.removeprefix('v')}, run ./task generate, commit, and tag again"
        )
    return rel.tag


def kcl_option(root: Path = ROOT) -> str:
    """The option `release` kcl/ reads (JSON): version as a tag, and the registry."""
    version, registry = settings(root)
    return json.dumps({"version": f"v{version}", "registry": registry})
