"""Print the control-plane manifests the end-to-end suites need, from the generated package.

    python tests/e2e/setup/manifests.py packages [--clouds aws,azure,google]
    python tests/e2e/setup/manifests.py definitions | compositions
    python tests/e2e/setup/manifests.py providerconfigs [--clouds aws,azure,google]

`packages`: a Function or Provider for every `spec.dependsOn` entry of the generated
`package/crossplane.yaml`, at the version it pins (the floor of its `>=vX.Y.Z, <vA.B.C`
range, which kcl/versions.k writes), named as Crossplane's package manager names dependencies
(`<org>-<repository>`, the names the Compositions' `functionRef`s use). Cloud providers are
printed only for the clouds asked for. provider-kubernetes and provider-helm use the
DeploymentRuntimeConfigs in setup/runtime.yaml. `DOT_INFERENCE_FUNCTION_PACKAGE` replaces the
function-dot-inference package reference (e.g. a build pushed to a registry KinD can reach).

`definitions`, `compositions`: the XRDs and Compositions of package/, to apply directly (the
Configuration itself is not published for these tests).

`providerconfigs`: ClusterProviderConfigs `local` (provider-kubernetes and provider-helm,
InjectedIdentity) and, per cloud asked for, the cloud provider's ClusterProviderConfig
`default` reading the Secret `aws-creds`, `azure-creds` or `gcp-creds` (key `creds`) in
crossplane-system (`CREDENTIALS_SECRETS`). Google also
needs the project: `gcpProjectId` from tests/e2e/values.yaml (the file the suites get with
`--values`), or `$GCP_PROJECT_ID`.

Versions are never written here: they come from package/crossplane.yaml, which
`./task generate` writes from kcl/versions.k.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path
from typing import Any

import yaml

from dot_inference import release

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "package"
VALUES = ROOT / "tests" / "e2e" / "values.yaml"

CROSSPLANE_SYSTEM = "crossplane-system"
CLOUDS = ("aws", "azure", "google")
# Which provider packages belong to which cloud (`provider: google` uses the gcp providers).
_CLOUD_PACKAGE = re.compile(r"/provider-(?:family-)?(aws|azure|gcp)(?:-[a-z0-9-]+)?$")
_CLOUD_OF_PREFIX = {"aws": "aws", "azure": "azure", "gcp": "google"}
# Providers that run under the service accounts of setup/runtime.yaml.
RUNTIME_CONFIGS = ("provider-kubernetes", "provider-helm")
FUNCTION_OVERRIDE_ENV = "DOT_INFERENCE_FUNCTION_PACKAGE"
# The Secret (key `creds`, in crossplane-system) each cloud's ClusterProviderConfig reads.
CREDENTIALS_SECRETS = {"aws": "aws-creds", "azure": "azure-creds", "google": "gcp-creds"}
_FLOOR = re.compile(r"^>=\s*(v?\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.-]+)?)\s*,\s*<\s*v?\d+\.\d+\.\d+$")


class ManifestError(Exception):
    """The package metadata is not what this script can read."""


def _load_all(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]


def package_name(package: str) -> str:
    """`xpkg.crossplane.io/crossplane-contrib/function-kcl` -> `crossplane-contrib-function-kcl`,
    the name Crossplane's package manager gives a dependency."""
    if len(package.split("/")) < 3:
        raise ManifestError(f"{package!r} is not <registry>/<org>/<repository>")
    return release.dependency_name(package)


def pinned_version(constraint: str, package: str) -> str:
    m = _FLOOR.match(constraint.strip())
    if not m:
        raise ManifestError(
            f"{package}: version constraint {constraint!r} is not `>=vX.Y.Z, <vA.B.C`; "
            "cannot tell which version to install"
        )
    return m.group(1)


def cloud_of(package: str) -> str | None:
    m = _CLOUD_PACKAGE.search(package)
    return _CLOUD_OF_PREFIX[m.group(1)] if m else None


def dependencies(package_dir: Path = PACKAGE) -> list[dict[str, Any]]:
    meta = _load_all(package_dir / "crossplane.yaml")
    if not meta or meta[0].get("kind") != "Configuration":
        raise ManifestError(f"{package_dir / 'crossplane.yaml'}: no Configuration")
    deps = (meta[0].get("spec") or {}).get("dependsOn") or []
    if not deps:
        raise ManifestError(f"{package_dir / 'crossplane.yaml'}: spec.dependsOn is empty")
    return deps


def packages(clouds: set[str], package_dir: Path = PACKAGE) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for dep in dependencies(package_dir):
        kind = dep.get("kind")
        package = str(dep.get("package") or "")
        if kind not in ("Function", "Provider") or not package:
            raise ManifestError(f"dependsOn entry {dep!r} is not a Function or Provider package")
        cloud = cloud_of(package) if kind == "Provider" else None
        if cloud is not None and cloud not in clouds:
            continue
        name = package_name(package)
        ref = f"{package}:{pinned_version(str(dep.get('version', '')), package)}"
        if package == release.release().function_package and os.environ.get(FUNCTION_OVERRIDE_ENV):
            ref = os.environ[FUNCTION_OVERRIDE_ENV]
        spec: dict[str, Any] = {"package": ref}
        short = package.rsplit("/", 1)[-1]
        if kind == "Provider" and short in RUNTIME_CONFIGS:
            spec["runtimeConfigRef"] = {
                "apiVersion": "pkg.crossplane.io/v1beta1",
                "kind": "DeploymentRuntimeConfig",
                "name": short,
            }
        out.append(
            {
                "apiVersion": str(dep.get("apiVersion") or "pkg.crossplane.io/v1"),
                "kind": kind,
                "metadata": {"name": name},
                "spec": spec,
            }
        )
    return out


def package_objects(kind: str, package_dir: Path = PACKAGE) -> list[dict[str, Any]]:
    out = []
    for path in sorted(package_dir.rglob("*.yaml")):
        for doc in _load_all(path):
            group = str(doc.get("apiVersion", "")).split("/")[0]
            if group == "apiextensions.crossplane.io" and doc.get("kind") == kind:
                out.append(doc)
    return out


def _values() -> dict[str, Any]:
    if VALUES.is_file():
        data = yaml.safe_load(VALUES.read_text()) or {}
        if isinstance(data, dict):
            return data
    return {}


def _secret_ref(cloud: str) -> dict[str, str]:
    return {"namespace": CROSSPLANE_SYSTEM, "name": CREDENTIALS_SECRETS[cloud], "key": "creds"}


def providerconfigs(clouds: set[str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {
            "apiVersion": api,
            "kind": "ClusterProviderConfig",
            "metadata": {"name": "local"},
            "spec": {"credentials": {"source": "InjectedIdentity"}},
        }
        for api in ("kubernetes.m.crossplane.io/v1alpha1", "helm.m.crossplane.io/v1beta1")
    ]
    if "aws" in clouds:
        out.append(
            {
                "apiVersion": "aws.m.upbound.io/v1beta1",
                "kind": "ClusterProviderConfig",
                "metadata": {"name": "default"},
                "spec": {"credentials": {"source": "Secret", "secretRef": _secret_ref("aws")}},
            }
        )
    if "azure" in clouds:
        out.append(
            {
                "apiVersion": "azure.m.upbound.io/v1beta1",
                "kind": "ClusterProviderConfig",
                "metadata": {"name": "default"},
                "spec": {"credentials": {"source": "Secret", "secretRef": _secret_ref("azure")}},
            }
        )
    if "google" in clouds:
        project = os.environ.get("GCP_PROJECT_ID") or _values().get("gcpProjectId")
        if not project:
            raise ManifestError(
                f"google: set gcpProjectId in {VALUES.relative_to(ROOT)} or $GCP_PROJECT_ID"
            )
        out.append(
            {
                "apiVersion": "gcp.m.upbound.io/v1beta1",
                "kind": "ClusterProviderConfig",
                "metadata": {"name": "default"},
                "spec": {
                    "projectID": str(project),
                    "credentials": {"source": "Secret", "secretRef": _secret_ref("google")},
                },
            }
        )
    return out


def _clouds(value: str) -> set[str]:
    chosen = {c.strip() for c in value.split(",") if c.strip()}
    unknown = chosen - set(CLOUDS)
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown cloud(s) {', '.join(sorted(unknown))}; use {', '.join(CLOUDS)}"
        )
    return chosen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "what", choices=["packages", "definitions", "compositions", "providerconfigs"]
    )
    parser.add_argument(
        "--clouds",
        type=_clouds,
        default=set(),
        help="comma-separated clouds whose providers to include (aws, azure, google)",
    )
    args = parser.parse_args(argv)
    try:
        if args.what == "packages":
            docs = packages(args.clouds)
        elif args.what == "definitions":
            docs = package_objects("CompositeResourceDefinition")
        elif args.what == "compositions":
            docs = package_objects("Composition")
        else:
            docs = providerconfigs(args.clouds)
    except (ManifestError, OSError, yaml.YAMLError) as e:
        print(f"manifests.py: {e}", file=sys.stderr)
        return 1
    sys.stdout.write(yaml.safe_dump_all(docs, sort_keys=False, explicit_start=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
