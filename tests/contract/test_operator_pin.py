"""The production-stack operator is installed from one pin, and validated against that pin.

kcl/versions.k pins a commit of vllm-project/production-stack; the InferenceCluster installs
that commit's CRDs (passed into its Composition by the generator) and runs the controller
image built from it; the offline validation reads the same CRDs from
schemas/production-stack, whose SOURCE names the commit (tests/contract/test_vendored_schemas.py
holds it to the pin). Before this, the cluster
applied the stale `operator/config/default.yaml` of a release tag (no shmSize,
nodeSelectorTerms, toleration, hfTokenSecret shape, status.availableReplicas...) and ran
`:latest`, while the tests validated against other CRDs.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import EXAMPLES, PACKAGE, load_yaml, parse_yaml_all

from dot_inference.apiserver import schema_dirs
from dot_inference.crossplane import documents, render
from dot_inference.generate import GenerateError, production_stack_upstream, render_files
from dot_inference.pins import pin

UPSTREAM = schema_dirs()[0] / "production-stack"
CLUSTER_EXAMPLES = sorted(EXAMPLES.glob("cluster-*.yaml"))


def _kcl_params() -> dict:
    comp = load_yaml(PACKAGE / "inferencecluster" / "composition.yaml")[0]
    step = next(s for s in comp["spec"]["pipeline"] if s["step"] == "kcl")
    return step["input"]["spec"]["params"]


def test_the_cluster_installs_exactly_the_crds_the_tests_validate_against() -> None:
    installed = {c["metadata"]["name"]: c for c in _kcl_params()["productionStackCrds"]}
    upstream = {
        d["metadata"]["name"]: d
        for f in sorted(UPSTREAM.glob("*.yaml"))
        for d in parse_yaml_all(f.read_text())
        if d
    }
    assert installed.keys() == upstream.keys()
    for name, crd in upstream.items():
        assert installed[name]["spec"] == crd["spec"], f"{name} differs from the pinned CRD"
    vllmruntime = installed["vllmruntimes.production-stack.vllm.ai"]["spec"]
    schema = vllmruntime["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
    deployment = schema["spec"]["properties"]["deploymentConfig"]["properties"]
    # What the stale release manifest lacked, and the function writes.
    for field in ("shmSize", "nodeSelectorTerms", "toleration", "runtimeClass", "podAnnotations"):
        assert field in deployment, field
    assert "availableReplicas" in schema["status"]["properties"]
    assert vllmruntime["versions"][0]["subresources"].get("scale")


def test_generate_refuses_crds_of_another_commit(tmp_path: Path) -> None:
    other = tmp_path / "production-stack"
    shutil.copytree(UPSTREAM, other)
    for folder in (
        "gateway-api",
        "gateway-api-inference-extension",
        "llm-d-router",
        "production-stack-dashboards",
    ):
        (tmp_path / folder).symlink_to(UPSTREAM.parent / folder)
    source = (other / "SOURCE").read_text()
    (other / "SOURCE").write_text(source.replace(pin("production_stack_operator"), "deadbeef" * 5))
    with pytest.raises(GenerateError) as e:
        render_files(schemas=tmp_path)
    message = str(e.value)
    assert pin("production_stack_operator") in message
    assert "deadbeef" * 5 in message


def test_generate_says_where_the_crds_come_from(tmp_path: Path) -> None:
    with pytest.raises(GenerateError, match="production-stack/SOURCE is missing"):
        production_stack_upstream(tmp_path)


@pytest.mark.parametrize("example", CLUSTER_EXAMPLES, ids=lambda p: p.name)
def test_every_cluster_runs_the_controller_built_from_the_pin(example: Path) -> None:
    pkg = documents.load_package(PACKAGE)
    for xr in documents.load_objects(example):
        if not render.is_handled_xr(pkg, xr):
            continue
        result = render.render_in_package(pkg, xr)
        assert result.fatal is None, result.fatal
        manifests = [
            o["spec"]["forProvider"]["manifest"] for o in result.composed if o["kind"] == "Object"
        ]
        assert not [m for m in manifests if m["kind"] == "Job"], "no installer Job"
        assert not [m for m in manifests if m.get("roleRef", {}).get("name") == "cluster-admin"], (
            "nothing is bound to cluster-admin"
        )
        if not xr["spec"]["parameters"].get("apps", {}).get("vllm", {}).get("enabled"):
            continue
        [controller] = [
            m
            for m in manifests
            if m["kind"] == "Deployment" and m["metadata"]["namespace"] == "production-stack-system"
        ]
        image = controller["spec"]["template"]["spec"]["containers"][0]["image"]
        expected = f"{pin('production_stack_operator_image')}:{pin('production_stack_operator')}"
        assert image == expected
