"""The generated package and its neighbours validate against the upstream schemas: the
Configuration and Function metadata, the XRDs and Compositions, the function's input CRD and
the input the Composition passes, the RBAC manifest, and examples/functions.yaml."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import (
    EXAMPLES,
    PACKAGE,
    ROOT,
    composition_input,
    load_yaml,
    parse_yaml,
    weight_tools,
)

from dot_inference.apiserver import validate_objects

FILES = sorted(
    [
        *PACKAGE.rglob("*.yaml"),
        *(ROOT / "function" / "package").rglob("*.yaml"),
        *(ROOT / "install").glob("*.yaml"),
        EXAMPLES / "functions.yaml",
    ]
)


@pytest.mark.parametrize("path", FILES, ids=[p.relative_to(ROOT).as_posix() for p in FILES])
def test_generated_file_validates(path: Path) -> None:
    report = validate_objects(load_yaml(path))
    assert report.invalid == [], report.invalid
    assert report.no_schema == [], report.no_schema


def test_composition_input_matches_the_function_input_crd() -> None:
    crd_dir = ROOT / "function" / "package" / "input"
    report = validate_objects([composition_input()], schema_paths=[crd_dir])
    assert report.ok, (report.invalid, report.no_schema)


def test_configuration_depends_on_every_function_the_compositions_use() -> None:
    config = load_yaml(PACKAGE / "crossplane.yaml")[0]
    packages = {d["package"].split("/")[-1] for d in config["spec"]["dependsOn"]}
    for comp_path in PACKAGE.rglob("composition.yaml"):
        comp = parse_yaml(comp_path.read_text().split("\n", 1)[1])
        for step in comp["spec"]["pipeline"]:
            name = step["functionRef"]["name"]
            assert any(name.endswith(p) for p in packages), f"{name} is not in dependsOn"
    assert all(d["apiVersion"] == "pkg.crossplane.io/v1" for d in config["spec"]["dependsOn"])


# Crossplane's own ClusterRole (upstream-facts section 1): Secrets, Services, ServiceAccounts,
# Deployments and everything in *.crossplane.io.
CROSSPLANE_OWN = {
    ("", "secrets"),
    ("", "services"),
    ("", "serviceaccounts"),
    ("apps", "deployments"),
}


def test_crossplane_may_manage_every_kind_composed_directly() -> None:
    """An LLMInference without a cluster composes into the control plane: each kind needs
    Crossplane's own role or install/crossplane-rbac.yaml."""
    from function.compose import compose
    from function.outcome import Inputs

    granted = set(CROSSPLANE_OWN)
    for role in load_yaml(ROOT / "install" / "crossplane-rbac.yaml"):
        for rule in role["rules"]:
            if {"create", "update", "patch", "delete"} <= set(rule["verbs"]):
                granted |= {(g, r) for g in rule["apiGroups"] for r in rule["resources"]}
    plural = {
        "VLLMRuntime": "vllmruntimes",
        "Ingress": "ingresses",
        "Job": "jobs",
        "PersistentVolumeClaim": "persistentvolumeclaims",
        "ScaledObject": "scaledobjects",
        "Deployment": "deployments",
        "Service": "services",
    }
    claims = [
        (path.name, claim)
        for path in sorted(EXAMPLES.glob("llm-*.yaml"))
        for claim in load_yaml(path)
        if claim.get("kind") == "LLMInference" and "clusterRef" not in claim["spec"]["parameters"]
    ]
    # Autoscaled and simulated on the control plane: a ScaledObject, a Deployment, a Service.
    simulated = {
        "apiVersion": "inference.devopstoolkit.ai/v1alpha1",
        "kind": "LLMInference",
        "metadata": {"name": "sim", "namespace": "a-team"},
        "spec": {
            "parameters": {
                "model": "Qwen/Qwen2.5-1.5B-Instruct",
                "ingressHost": "sim.example.com",
                "autoscaling": {"maxReplicas": 2},
                "engine": {"simulate": True},
            }
        },
    }
    claims.append(("a simulated, autoscaled claim", simulated))
    seen = set()
    step = composition_input()
    for where, claim in claims:
        out = compose(
            Inputs(
                xr=claim,
                engine_image=step["engine"]["image"],
                simulator_image=step["simulator"]["image"],
                **weight_tools(),
            )
        )
        assert out.fatal is None, out.fatal
        for obj in out.resources.values():
            group = obj["apiVersion"].rpartition("/")[0]
            if group.endswith("crossplane.io"):
                continue
            seen.add(obj["kind"])
            assert (group, plural[obj["kind"]]) in granted, f"{where}: {obj['kind']}"
    assert seen == set(plural), f"every kind checked: {sorted(set(plural) - seen)} never composed"


def test_dependencies_are_compatible_ranges_not_floors() -> None:
    """A `>=` floor takes any future major version of a provider or function; each
    dependency is pinned up to its next major (next minor for 0.x)."""
    import re

    config = load_yaml(PACKAGE / "crossplane.yaml")[0]
    ranges = [config["spec"]["crossplane"]["version"]] + [
        d["version"] for d in config["spec"]["dependsOn"]
    ]
    for r in ranges:
        m = re.fullmatch(r">=v(\d+)\.(\d+)\.(\d+), <v(\d+)\.(\d+)\.0", r)
        assert m, f"{r!r} is not a bounded range"
        major, minor, _, next_major, next_minor = (int(g) for g in m.groups())
        if major > 0:
            assert (next_major, next_minor) == (major + 1, 0), r
        else:
            assert (next_major, next_minor) == (0, minor + 1), r
