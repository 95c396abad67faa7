"""Who may deploy what where: a claim's objects land only in namespaces its own namespace may
use on the target, never in a system namespace (function/tenancy.py, kcl/tenancy.k)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from conftest import EXAMPLES, PACKAGE, ROOT, engine_image, llmd_images, load_yaml, simulator_image

from function import tenancy
from function.compose import Inputs, compose

CLUSTER = load_yaml(EXAMPLES / "state" / "llm-qwen-on-aws.yaml")[0]


def claim(namespace: str = "a-team", **params: Any) -> dict[str, Any]:
    return {
        "apiVersion": "inference.devopstoolkit.ai/v1alpha1",
        "kind": "LLMInference",
        "metadata": {"name": "qwen", "namespace": namespace},
        "spec": {"parameters": {"model": "Qwen/Qwen2.5-1.5B-Instruct", **params}},
    }


def cluster(router: str = "a-team", allowed: list[str] | None = None) -> dict[str, Any]:
    c = {**CLUSTER, "status": {**CLUSTER["status"]}}
    c["status"]["vllm"] = {**c["status"]["vllm"], "namespace": router}
    c["status"]["tenancy"] = {
        **c["status"].get("tenancy", {}),
        "allowedNamespaces": ["a-team", router, *(allowed or [])],
    }
    return c


ON_CLUSTER = {"clusterRef": {"name": "inference-aws"}}

# (case, claim, cluster or None, the namespace it lands in, or the start of the refusal)
CASES: list[tuple[str, dict[str, Any], dict[str, Any] | None, str]] = [
    ("own namespace through a ProviderConfig", claim(providerConfigName="pc"), None, "a-team"),
    (
        "another team's namespace through a ProviderConfig",
        claim(providerConfigName="pc", targetNamespace="b-team"),
        None,
        "spec.parameters.targetNamespace: claims in namespace a-team may not deploy into b-team "
        "on the target cluster; allowed: a-team (without an InferenceCluster",
    ),
    (
        "kube-system",
        claim(providerConfigName="pc", targetNamespace="kube-system"),
        None,
        "spec.parameters.targetNamespace: kube-system is a system namespace",
    ),
    ("the cluster's router namespace by default", claim(**ON_CLUSTER), cluster("llm"), "llm"),
    (
        "a namespace the cluster allows",
        claim(**ON_CLUSTER, targetNamespace="a-team-staging"),
        cluster(allowed=["a-team-staging"]),
        "a-team-staging",
    ),
    (
        "a namespace the cluster does not allow",
        claim(**ON_CLUSTER, targetNamespace="b-team"),
        cluster(allowed=["a-team-staging"]),
        "spec.parameters.targetNamespace: claims in namespace a-team may not deploy into b-team "
        "on InferenceCluster a-team/inference-aws; allowed: a-team, a-team-staging (the platform "
        "team can allow more in spec.parameters.tenancy.allowedNamespaces",
    ),
    (
        "a system namespace even when a cluster lists it",
        claim(**ON_CLUSTER, targetNamespace="gpu-operator"),
        cluster(allowed=["gpu-operator"]),
        "spec.parameters.targetNamespace: gpu-operator is a system namespace",
    ),
    (
        "the operator's namespace",
        claim(providerConfigName="pc", targetNamespace="production-stack-system"),
        None,
        "spec.parameters.targetNamespace: production-stack-system is a system namespace",
    ),
    (
        "a claim created in a system namespace, deploying elsewhere",
        claim("crossplane-system", providerConfigName="pc"),
        None,
        "metadata.namespace: crossplane-system is a system namespace",
    ),
]


@pytest.mark.parametrize(
    ("xr", "found", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_where_a_claim_may_deploy(
    xr: dict[str, Any], found: dict[str, Any] | None, expected: str
) -> None:
    required = {"inference-cluster": [found]} if found else {}
    out = compose(Inputs(xr=xr, engine_image=engine_image(), required=required))
    if " " in expected:
        assert out.fatal and out.fatal.startswith(expected), out.fatal
        assert not out.resources
        return
    assert out.fatal is None, out.fatal
    manifests = [
        o["spec"]["forProvider"]["manifest"]
        for o in out.resources.values()
        if o["kind"] == "Object"
    ]
    assert manifests and {m["metadata"].get("namespace", expected) for m in manifests} == {expected}


def test_the_reserved_namespaces_have_one_home() -> None:
    """function/tenancy.py and kcl/tenancy.k list the same namespaces, and the program's
    apps use only those."""
    text = (ROOT / "kcl" / "tenancy.k").read_text()
    listed = re.search(r"^reserved_namespaces = \[([^\]]*)\]", text, re.M)
    assert listed
    assert set(re.findall(r'"([^"]+)"', listed.group(1))) == set(tenancy.RESERVED)
    comp = load_yaml(PACKAGE / "inferencecluster" / "composition.yaml")[0]
    params = comp["spec"]["pipeline"][0]["input"]["spec"]["params"]
    assert set(params["reservedNamespaces"]) == set(tenancy.RESERVED)


@pytest.mark.parametrize(
    ("claim_ns", "allowed", "expected"),
    [("a", [], ["a"]), ("a", ["b", "a", "c"], ["a", "b", "c"])],
)
def test_allowed_keeps_the_claims_namespace_first(
    claim_ns: str, allowed: list[str], expected: list[str]
) -> None:
    assert tenancy.allowed(claim_ns, allowed) == expected


def test_the_models_identity_grants_what_models_compose_and_no_more() -> None:
    """The ClusterRole a local/existing cluster binds for its models covers every kind the
    function composes on a cluster, with nothing else (no namespaces, no wildcards)."""
    from dot_inference.crossplane import documents, render

    pkg = documents.load_package(PACKAGE)
    result = render.render_in_package(pkg, load_yaml(EXAMPLES / "cluster-local.yaml")[0])
    role = next(
        o["spec"]["forProvider"]["manifest"]
        for o in result.composed
        if o["metadata"]["annotations"]["crossplane.io/composition-resource-name"]
        == "models-clusterrole"
    )
    granted = {
        (g, r)
        for rule in role["rules"]
        if "create" in rule["verbs"]
        for g in rule["apiGroups"]
        for r in rule["resources"]
    }
    # Read only: what an llm-d model's router Role grants (Kubernetes lets a Role grant only
    # what its creator holds).
    read_only = {
        (g, r)
        for rule in role["rules"]
        if "create" not in rule["verbs"]
        for g in rule["apiGroups"]
        for r in rule["resources"]
    }
    plural = {
        "VLLMRuntime": "vllmruntimes",
        "Ingress": "ingresses",
        "Job": "jobs",
        "PersistentVolumeClaim": "persistentvolumeclaims",
        "Secret": "secrets",
        "ScaledObject": "scaledobjects",
        "Deployment": "deployments",
        "Service": "services",
        "LeaderWorkerSet": "leaderworkersets",
        "StatefulSet": "statefulsets",
        "InferencePool": "inferencepools",
        "HTTPRoute": "httproutes",
        "ServiceAccount": "serviceaccounts",
        "Role": "roles",
        "RoleBinding": "rolebindings",
        "ConfigMap": "configmaps",
    }
    state = {**CLUSTER, "status": {**CLUSTER["status"], "apps": {**CLUSTER["status"]["apps"]}}}
    state["status"]["apps"]["keda"] = True
    state["status"]["apps"]["lws"] = True
    state["status"]["apps"]["llmd"] = True
    state["status"]["llmd"] = {"gateway": {"name": "gw", "namespace": "agentgateway-system"}}
    state["status"]["gpu"] = {**state["status"]["gpu"], "rdma": {"enabled": True}}
    roles_grant: set[tuple[str, str]] = set()
    composed = set()
    scaled = {"autoscaling": {"maxReplicas": 2}}
    variants = [
        {"model": "Qwen/Qwen2.5-1.5B-Instruct"},
        {"model": "meta-llama/Llama-3.1-8B-Instruct"},  # gated: the token Secret
        {"model": "Qwen/Qwen2.5-1.5B-Instruct", "engine": {"simulate": True}, **scaled},
        {"model": "Qwen/Qwen2.5-32B-Instruct"},  # two nodes of 4 L4: a LeaderWorkerSet
        {"model": "Qwen/Qwen2.5-7B-Instruct", "backend": "llmd", **scaled},
        {
            "model": "Qwen/Qwen2.5-7B-Instruct",
            "backend": "llmd",
            "disaggregation": {"prefill": {"gpu": 1}, "decode": {"gpu": 2}},
        },
    ]
    for params in variants:
        xr = claim(**ON_CLUSTER, ingressHost="q.example.com", **params)
        secret = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "hf-token", "namespace": "a-team"},
            "type": "Opaque",
            "data": {"token": "eA=="},
        }
        out = compose(
            Inputs(
                xr=xr,
                engine_image=engine_image(),
                simulator_image=simulator_image(),
                required={"inference-cluster": [state], "secret-hf-token": [secret]},
                **llmd_images(),
            )
        )
        assert out.fatal is None, out.fatal
        for o in out.resources.values():
            if o["kind"] == "Object":
                m = o["spec"]["forProvider"]["manifest"]
                composed.add((m["apiVersion"].rpartition("/")[0], plural[m["kind"]]))
                if m["kind"] == "Role":
                    roles_grant |= {
                        (g, r)
                        for rule in m["rules"]
                        for g in rule["apiGroups"]
                        for r in rule["resources"]
                    }
    assert composed == granted
    assert read_only == roles_grant - granted, "reads exactly what the routers' Roles grant"
