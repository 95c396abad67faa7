"""InferenceCluster end to end, offline: every example claim rendered through the real
Composition (function-kcl emulated on kcl-lib, then function-auto-ready), and every object it
composes validated against the upstream schemas.

The package comes from `package/` when it has been generated; otherwise the XRD and the
Composition are evaluated from `kcl/` (a copy, so nothing is written into the tree).
"""

from __future__ import annotations

import copy
import re
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import EXAMPLES, PACKAGE, ROOT, parse_yaml

from dot_inference.apiserver import schema_dirs, validate_objects
from dot_inference.crossplane.documents import load_package
from dot_inference.crossplane.render import default_runners, render

XRD_NAME = "inferenceclusters.inference.devopstoolkit.ai"
ANSI = re.compile(r"\x1b\[[0-9;]*m")

M_AWS_EC2 = "ec2.aws.m.upbound.io/v1beta1"
M_AWS_IAM = "iam.aws.m.upbound.io/v1beta1"
M_AWS_EKS = "eks.aws.m.upbound.io/v1beta1"
M_AWS_EFS = "efs.aws.m.upbound.io/v1beta1"
M_AZURE = "azure.m.upbound.io/v1beta1"
M_AKS = "containerservice.azure.m.upbound.io/v1beta1"
M_GCP_COMPUTE = "compute.gcp.m.upbound.io/v1beta1"
M_GKE = "container.gcp.m.upbound.io/v1beta1"
HELM = "helm.m.crossplane.io/v1beta1"
K8S = "kubernetes.m.crossplane.io/v1alpha1"
USAGE = "protection.crossplane.io/v1beta1"

# Every example turns on GPUs, nvidia, vllm and ingress: 3 Releases (aws and local also KEDA:
# one more, and its Usage, KEDA below); the production-stack
# operator is 15 Objects (Namespace, 4 CRDs, ServiceAccount, 4 RBAC roles and 4 bindings...
# see operator.k; GKE adds the GPU Operator's ResourceQuota).
OPERATOR_OBJECTS = 15
# Objects for the models besides the operator: the namespace they deploy into (a-team; on
# aws and google also the model-cache StorageClass, counted per provider below).
MODEL_OBJECTS = 1
APPS = {
    (HELM, "Release"): 3,
    (K8S, "Object"): OPERATOR_OBJECTS + MODEL_OBJECTS,
    (HELM, "ProviderConfig"): 1,
    (K8S, "ProviderConfig"): 1,
}

KEDA = {(HELM, "Release"): 4}

CASES: dict[str, dict[str, Any]] = {
    "aws": {
        "example": "cluster-aws.yaml",
        "kinds": {
            (M_AWS_EC2, "VPC"): 1,
            (M_AWS_EC2, "Subnet"): 3,
            (M_AWS_EC2, "InternetGateway"): 1,
            (M_AWS_EC2, "RouteTable"): 1,
            (M_AWS_EC2, "Route"): 1,
            (M_AWS_EC2, "MainRouteTableAssociation"): 1,
            (M_AWS_EC2, "RouteTableAssociation"): 3,
            # + the cluster autoscaler's role, its policy and its Pod Identity association
            (M_AWS_IAM, "Role"): 3,
            (M_AWS_IAM, "RolePolicy"): 1,
            (M_AWS_EKS, "PodIdentityAssociation"): 1,
            (M_AWS_IAM, "RolePolicyAttachment"): 6,
            (M_AWS_EKS, "Cluster"): 1,
            (M_AWS_EKS, "ClusterAuth"): 1,
            (M_AWS_EKS, "NodeGroup"): 2,
            (M_AWS_EKS, "Addon"): 3,  # the EBS and EFS CSI drivers, the Pod Identity agent
            # The shared model cache: EFS, a mount target per subnet, NFS from the VPC.
            (M_AWS_EC2, "SecurityGroup"): 1,
            (M_AWS_EC2, "SecurityGroupIngressRule"): 1,
            (M_AWS_EFS, "FileSystem"): 1,
            (M_AWS_EFS, "MountTarget"): 3,
            **APPS,
            **KEDA,
            (HELM, "Release"): 5,  # + the cluster autoscaler
            # + the StorageClass (the shared one waits for the file system's id)
            (K8S, "Object"): OPERATOR_OBJECTS + MODEL_OBJECTS + 1,
            # one per app resource and model object + cluster and ClusterAuth, each by both
            # ProviderConfigs + one per reference between the cloud resources (IGW, route
            # table, MRTA x2, route x2, 3 subnets, 3 RTAs x2, 6 policy attachments, EKS x4,
            # ClusterAuth, 2 node groups x5, 2 add-ons, the security group and its rule,
            # 3 mount targets x3, the autoscaler's policy, add-on and association x2) + the
            # autoscaler's release
            (USAGE, "Usage"): 4 + OPERATOR_OBJECTS + MODEL_OBJECTS + 1 + 4 + 53 + 1,
        },
    },
    "azure": {
        "example": "cluster-azure.yaml",
        "kinds": {
            (M_AZURE, "ResourceGroup"): 1,
            (M_AKS, "KubernetesCluster"): 1,
            (M_AKS, "KubernetesClusterNodePool"): 1,
            **APPS,
            # + the cluster by both ProviderConfigs, the cluster of its resource group, the
            # GPU pool of the cluster
            (USAGE, "Usage"): 3 + OPERATOR_OBJECTS + MODEL_OBJECTS + 2 + 2,
        },
    },
    "google": {
        "example": "cluster-google.yaml",
        "kinds": {
            (M_GCP_COMPUTE, "Network"): 1,
            (M_GCP_COMPUTE, "Subnetwork"): 1,
            (M_GKE, "Cluster"): 1,
            (M_GKE, "NodePool"): 2,
            **APPS,
            **KEDA,
            # + the GPU Operator quota, the StorageClass and the shared (Filestore) one
            (K8S, "Object"): OPERATOR_OBJECTS + MODEL_OBJECTS + 3,
            # + references: subnetwork and cluster of the network, cluster of the
            # subnetwork, both pools of the cluster; and KEDA's release
            (USAGE, "Usage"): 3 + OPERATOR_OBJECTS + MODEL_OBJECTS + 3 + 2 + 5 + 1,
        },
    },
    # local and existing: models act with a scoped identity (identity.k): a ClusterRole and a
    # RoleBinding per allowed namespace on the cluster (existing: also the identity's
    # namespace and ServiceAccount there; local: the ServiceAccount, its token Secret and the
    # kubeconfig that impersonates it on the control plane), its ProviderConfig, Usages of
    # the admin ProviderConfig by the RBAC Objects and of the identity's parts by its
    # ProviderConfig.
    "local": {
        "example": "cluster-local.yaml",
        "kinds": {
            **APPS,
            **KEDA,
            (K8S, "Object"): OPERATOR_OBJECTS + MODEL_OBJECTS + 2,
            (K8S, "ProviderConfig"): 2,
            ("v1", "ServiceAccount"): 1,
            ("v1", "Secret"): 2,  # the ServiceAccount's token, the kubeconfig
            (USAGE, "Usage"): 4 + OPERATOR_OBJECTS + MODEL_OBJECTS + 2 + 5,
        },
    },
    "existing": {
        "example": "cluster-existing.yaml",
        "kinds": {
            **APPS,
            (K8S, "Object"): OPERATOR_OBJECTS + MODEL_OBJECTS + 4,
            (K8S, "ProviderConfig"): 2,
            (USAGE, "Usage"): 3 + OPERATOR_OBJECTS + MODEL_OBJECTS + 4 + 4,
        },
    },
}


def _from_kcl(tmp: Path) -> tuple[dict, dict]:
    import json

    from kcl_lib import api

    from dot_inference.generate import production_stack_upstream

    kcl = tmp / "kcl"
    shutil.copytree(ROOT / "kcl", kcl, ignore=shutil.ignore_patterns("_kcl_test_*"))
    main = kcl / "render_inferencecluster.k"
    main.write_text(
        "import inferencecluster\n\n"
        "xrd = inferencecluster.xrd\n"
        "composition = inferencecluster.composition\n"
    )
    upstream = api.Argument(name="productionStack", value=json.dumps(production_stack_upstream()))
    result = api.API().exec_program(
        api.ExecProgramArgs(k_filename_list=[str(main)], work_dir=str(kcl), args=[upstream])
    )
    assert not result.err_message, result.err_message
    out = parse_yaml(result.yaml_result)
    return out["xrd"], out["composition"]


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The InferenceCluster XRD and Composition, plus schema paths that include the XRD."""
    tmp = tmp_path_factory.mktemp("inferencecluster")
    if (PACKAGE / "inferencecluster" / "composition.yaml").exists():
        pkg = load_package(PACKAGE)
        xrd = next(x for x in pkg.xrds if x["metadata"]["name"] == XRD_NAME)
        composition = next(
            c
            for c in pkg.compositions
            if c["spec"]["compositeTypeRef"]["kind"] == "InferenceCluster"
        )
    else:
        xrd, composition = _from_kcl(tmp)
    schemas = tmp / "schemas"
    schemas.mkdir()
    (schemas / "definition.yaml").write_text(yaml.safe_dump(xrd))
    upstream = [p for p in schema_dirs() if p.resolve() != PACKAGE.resolve()]
    return {"xrd": xrd, "composition": composition, "schemas": [*upstream, schemas]}


def _example(name: str) -> dict:
    return parse_yaml((EXAMPLES / name).read_text())


def _render(package: dict, xr: dict, observed: list[dict] | None = None):
    return render(
        xr, package["composition"], default_runners(), xrd=package["xrd"], observed=observed or []
    )


def _kinds(objs: list[dict]) -> Counter:
    return Counter((o["apiVersion"], o["kind"]) for o in objs)


def _by_name(objs: list[dict], name: str) -> dict:
    found = [
        o
        for o in objs
        if o["metadata"].get("annotations", {}).get("crossplane.io/composition-resource-name")
        == name
    ]
    assert len(found) == 1, f"expected one composed resource {name}, found {len(found)}"
    return found[0]


@pytest.mark.parametrize("provider", list(CASES))
def test_example_renders_valid_objects(provider: str, package: dict) -> None:
    xr = _example(CASES[provider]["example"])
    assert xr["metadata"]["namespace"] == "a-team"
    assert xr["spec"]["parameters"]["provider"] == provider
    result = _render(package, xr)
    assert result.fatal is None, ANSI.sub("", result.fatal)
    report = validate_objects(result.composed, schema_paths=package["schemas"])
    assert report.ok, report.summary()
    # Each composed object, plus each manifest a provider-kubernetes Object wraps.
    wrapped = sum(1 for o in result.composed if o["kind"] == "Object")
    assert len(report.valid) == len(result.composed) + wrapped
    # The claim a user applies is valid against the XRD (OpenAPI and CEL).
    claim = validate_objects([xr], schema_paths=package["schemas"])
    assert claim.ok, claim.summary()


@pytest.mark.parametrize("provider", list(CASES))
def test_expected_kinds_per_provider(provider: str, package: dict) -> None:
    result = _render(package, _example(CASES[provider]["example"]))
    assert result.fatal is None, ANSI.sub("", result.fatal)
    assert _kinds(result.composed) == Counter(CASES[provider]["kinds"])
    # Everything lands in the claim's namespace; the ProviderConfigs carry the XR's name.
    assert {o["metadata"]["namespace"] for o in result.composed} == {"a-team"}
    name = result.xr["metadata"]["name"]
    pcs = [o for o in result.composed if o["kind"] == "ProviderConfig"]
    assert {o["metadata"]["name"] for o in pcs} <= {name, f"{name}-models"}


@pytest.mark.parametrize("provider", list(CASES))
def test_status_tells_llminference_what_it_needs(provider: str, package: dict) -> None:
    xr = _example(CASES[provider]["example"])
    status = _render(package, xr).xr["status"]
    assert status["providerConfigName"] == xr["metadata"]["name"]
    keda = xr["spec"]["parameters"]["apps"].get("keda", {}).get("enabled", False)
    assert status["apps"] == {
        "nvidia": True,
        "vllm": True,
        "keda": keda,
        "lws": False,
        "monitoring": False,
        "llmd": False,
        "ingress": True,
    }
    assert status["ingressClassName"] == "traefik"
    gpu = status["gpu"]
    assert gpu["enabled"] is True
    assert gpu["type"] == xr["spec"]["parameters"]["gpu"].get("type", gpu["type"])
    assert gpu["memoryGiB"] > 0 and gpu["perNode"] >= 1 and gpu["maxNodes"] >= 1
    assert gpu["nodeSelector"] and gpu["tolerations"]
    assert set(status["nodePools"]) == {"general", "gpu"}
    assert set(status["controlPlane"]) == {"ready", "state"}


@pytest.mark.parametrize("provider", list(CASES))
def test_apps_toggled_off_leave_no_trace(provider: str, package: dict) -> None:
    xr = _example(CASES[provider]["example"])
    xr["spec"]["parameters"]["apps"] = {
        "nvidia": {"enabled": False},
        "vllm": {"enabled": False},
        "ingress": {"enabled": False},
    }
    result = _render(package, xr)
    assert result.fatal is None, ANSI.sub("", result.fatal)
    app_kinds = {"Release", "Object"}
    # EKS's cluster autoscaler is the cluster's own, not an app (aws.k, apps.k).
    autoscaler = f"{xr['metadata']['name']}-cluster-autoscaler"
    assert not [
        o for o in result.composed if o["kind"] in app_kinds and o["metadata"]["name"] != autoscaler
    ]
    assert not [
        o
        for o in result.composed
        if o["kind"] == "Usage"
        and o["spec"]["by"]["kind"] in app_kinds
        and o["spec"]["by"]["resourceRef"]["name"] != autoscaler
    ]
    assert result.xr["status"]["apps"] == {
        "nvidia": False,
        "vllm": False,
        "keda": False,
        "lws": False,
        "monitoring": False,
        "llmd": False,
        "ingress": False,
    }
    assert "ingressClassName" not in result.xr["status"]
    assert validate_objects(result.composed, schema_paths=package["schemas"]).ok


@pytest.mark.parametrize(
    ("parameters", "message"),
    [
        pytest.param(
            {
                "provider": "google",
                "projectId": "my-project",
                "gpu": {"enabled": True, "type": "a10g"},
            },
            "gpu.type a10g is not offered on google; google offers t4 x1/2/4, l4 x1/4/8, "
            "a100-40gb x1/2/4/8, a100-80gb x1/2/4/8, h100 x8, h200 x8",
            id="a10g-on-google",
        ),
        pytest.param(
            {"provider": "aws", "gpu": {"enabled": True, "type": "h200"}},
            "gpu.type h200 is not offered on aws; "
            "aws offers l4 x1/4/8, a10g x1/4/8, a100-40gb x8, h100 x8",
            id="h200-on-aws",
        ),
        pytest.param(
            {"provider": "aws", "gpu": {"enabled": True, "type": "l4", "perNode": 2}},
            "l4 with 2 GPU(s) per node is not offered on aws; aws offers l4 x1/4/8",
            id="two-l4-per-node-on-aws",
        ),
        pytest.param(
            {"provider": "azure", "gpu": {"enabled": True, "type": "l4"}},
            "gpu.type l4 is not offered on azure; "
            "azure offers t4 x1/4, a100-40gb x8, a100-80gb x1/4, h100 x8",
            id="l4-on-azure",
        ),
        pytest.param(
            {"provider": "existing"},
            "spec.parameters.kubeconfigSecretRef is required when provider is existing",
            id="existing-without-kubeconfig",
        ),
        pytest.param(
            {"provider": "google"},
            "spec.parameters.projectId is required when provider is google",
            id="google-without-project",
        ),
        pytest.param(
            {"provider": "local", "gpu": {"enabled": True}},
            "spec.parameters.gpu.type is required when provider is local",
            id="local-gpu-without-type",
        ),
        pytest.param(
            {
                "provider": "local",
                "apps": {"vllm": {"enabled": True}},
                "models": [
                    {"model": "Qwen/Qwen2.5-7B-Instruct", "autoscaling": {"maxReplicas": 2}}
                ],
            },
            "spec.parameters.models: Qwen/Qwen2.5-7B-Instruct autoscale, which needs KEDA: set "
            "spec.parameters.apps.keda.enabled: true",
            id="autoscaled-model-without-keda",
        ),
        pytest.param(
            {
                "provider": "local",
                "apps": {"vllm": {"enabled": True, "endpoint": {"routingLogic": "session"}}},
            },
            "spec.parameters.apps.vllm.endpoint.sessionKey is required with routingLogic session",
            id="session-routing-without-key",
        ),
        pytest.param(
            {
                "provider": "local",
                "apps": {"vllm": {"enabled": True, "endpoint": {"routingLogic": "kvaware"}}},
            },
            "spec.parameters.apps.vllm.endpoint.routingLogic must be roundrobin, session or "
            "prefixaware, got kvaware (the router's kvaware logic needs LMCache's controller",
            id="kvaware-routing",
        ),
        pytest.param(
            {
                "provider": "local",
                "apps": {
                    "vllm": {"enabled": True, "endpoint": {"host": "llm.example.com"}},
                    "ingress": {"enabled": False},
                },
            },
            "spec.parameters.apps.vllm.endpoint.host llm.example.com is served through the "
            "cluster's ingress controller: keep spec.parameters.apps.ingress.enabled",
            id="endpoint-host-without-ingress",
        ),
        pytest.param(
            {
                "provider": "local",
                "apps": {"vllm": {"enabled": True, "endpoint": {"tlsSecretName": "tls"}}},
            },
            "spec.parameters.apps.vllm.endpoint.tlsSecretName needs host",
            id="tls-without-host",
        ),
        pytest.param(
            {
                "provider": "local",
                "apps": {"globalEndpoint": {"enabled": True, "tlsSecretName": "tls"}},
            },
            "spec.parameters.apps.globalEndpoint.tlsSecretName needs host",
            id="global-endpoint-tls-without-host",
        ),
        pytest.param(
            {
                "provider": "local",
                "apps": {"globalEndpoint": {"enabled": True, "host": "10.0.0.1"}},
            },
            "spec.parameters.apps.globalEndpoint.host: 10.0.0.1 is an IP address",
            id="global-endpoint-ip-host",
        ),
        pytest.param(
            {
                "provider": "existing",
                "kubeconfigSecretRef": {"name": "kc"},
                "apps": {"globalEndpoint": {"enabled": True}},
            },
            "spec.parameters.modelsKubeconfigSecretRef is required when provider is existing "
            "and apps.vllm, apps.llmd or apps.globalEndpoint is on",
            id="existing-global-endpoint-without-models-kubeconfig",
        ),
    ],
)
def test_bad_combinations_fail_with_what_would_work(
    parameters: dict, message: str, package: dict
) -> None:
    xr = {
        "apiVersion": "inference.devopstoolkit.ai/v1alpha1",
        "kind": "InferenceCluster",
        "metadata": {"name": "bad", "namespace": "a-team"},
        "spec": {"parameters": parameters},
    }
    result = _render(package, copy.deepcopy(xr))
    assert result.fatal, "expected a fatal result"
    assert message in ANSI.sub("", result.fatal)
    assert not result.composed, "nothing is composed when the input is wrong"


def test_status_follows_observed_readiness(package: dict) -> None:
    xr = _example("cluster-aws.yaml")
    first = _render(package, xr)
    assert first.xr["status"]["controlPlane"] == {"ready": False, "state": "Pending"}

    def observed(name: str, ready: str, reason: str) -> dict:
        obj = copy.deepcopy(_by_name(first.composed, name))
        obj["status"] = {"conditions": [{"type": "Ready", "status": ready, "reason": reason}]}
        return obj

    second = _render(
        package,
        xr,
        observed=[
            observed("cluster", "True", "Available"),
            observed("nodegroup-general", "True", "Available"),
            observed("nodegroup-gpu", "False", "Creating"),
        ],
    )
    status = second.xr["status"]
    assert status["controlPlane"] == {"ready": True, "state": "Available"}
    assert status["nodePools"] == {"general": {"ready": True}, "gpu": {"ready": False}}


def test_versions_reach_the_program_from_versions_k(package: dict) -> None:
    from dot_inference.pins import pin

    step = package["composition"]["spec"]["pipeline"][0]
    assert step["functionRef"]["name"] == "crossplane-contrib-function-kcl"
    assert step["input"]["spec"]["params"]["versions"] == {
        "gpuOperator": pin("gpu_operator"),
        "vllmStack": pin("vllm_stack"),
        "productionStackOperator": pin("production_stack_operator"),
        "productionStackOperatorImage": pin("production_stack_operator_image"),
        "cacheServerImage": f"{pin('vllm_image_repository')}:{pin('vllm_image_tag')}",
        "keda": pin("keda"),
        "lws": pin("lws"),
        "agentgateway": pin("agentgateway"),
        "traefik": pin("traefik"),
        "clusterAutoscaler": pin("cluster_autoscaler"),
        "kubePrometheusStack": pin("kube_prometheus_stack"),
    }
    assert [s["functionRef"]["name"] for s in package["composition"]["spec"]["pipeline"]] == [
        "crossplane-contrib-function-kcl",
        "crossplane-contrib-function-auto-ready",
    ]


@pytest.mark.parametrize(
    ("parameters", "message"),
    [
        ({"provider": "existing"}, "kubeconfigSecretRef is required when provider is existing"),
        (
            {"provider": "aws", "kubeconfigSecretRef": {"name": "k"}},
            "applies only to provider existing",
        ),
        ({"provider": "google"}, "projectId is required when provider is google"),
        ({"provider": "aws", "zone": "us-east-1a"}, "zone applies only to provider google"),
        (
            {"provider": "local", "gpu": {"enabled": True}},
            "gpu.type is required when provider is existing or local",
        ),
        (
            {"provider": "aws", "gpu": {"tolerations": []}},
            "gpu.nodeSelector, gpu.tolerations and gpu.runtimeClassName describe a pool",
        ),
        (
            {"provider": "aws", "gpu": {"minNodes": 3, "maxNodes": 2}},
            "gpu.maxNodes must be at least gpu.minNodes",
        ),
        ({"provider": "aws", "nodes": {"count": 5}}, "nodes.count must be between"),
        (
            {"provider": "google", "projectId": "p-1", "storage": {"sharedClassName": "nfs"}},
            "storage.sharedClassName applies only to providers existing and local",
        ),
        (
            {"provider": "existing", "storage": {"sharedClassName": "Not_A_Class"}},
            "sharedClassName",
        ),
        ({"provider": "ibm"}, "provider"),
        ({"provider": "aws", "gpu": {"type": "v100"}}, "gpu.type"),
        (
            {
                "provider": "local",
                "apps": {"vllm": {"enabled": True}},
                "models": [{"model": "a/b", "autoscaling": {"maxReplicas": 2}}],
            },
            "models[].autoscaling needs KEDA: set apps.keda.enabled: true",
        ),
        (
            {
                "provider": "local",
                "models": [{"model": "a/b", "replicas": 2, "autoscaling": {"maxReplicas": 2}}],
            },
            "models[]: replicas and autoscaling are exclusive",
        ),
        (
            {"provider": "local", "apps": {"vllm": {"endpoint": {"routingLogic": "session"}}}},
            "apps.vllm.endpoint.sessionKey is required with routingLogic session",
        ),
        (
            {"provider": "local", "apps": {"vllm": {"endpoint": {"sessionKey": "x-user"}}}},
            "apps.vllm.endpoint.sessionKey applies only to routingLogic session",
        ),
        (
            {"provider": "local", "apps": {"vllm": {"endpoint": {"routingLogic": "kvaware"}}}},
            "routingLogic",
        ),
        (
            {"provider": "local", "apps": {"vllm": {"endpoint": {"tlsSecretName": "tls"}}}},
            "apps.vllm.endpoint.tlsSecretName needs host",
        ),
        (
            {
                "provider": "local",
                "apps": {
                    "vllm": {"endpoint": {"host": "llm.example.com"}},
                    "ingress": {"enabled": False},
                },
            },
            "apps.vllm.endpoint.host is served through the cluster's ingress controller",
        ),
        (
            {"provider": "local", "models": [{"model": "a/b", "aliases": ["bad alias"]}]},
            "aliases",
        ),
        (
            {"provider": "local", "gpu": {"enabled": True, "rdma": {"resource": "rdma/ib"}}},
            "enabled",
        ),
        (
            {
                "provider": "local",
                "gpu": {"enabled": True, "rdma": {"enabled": True, "resource": "RDMA IB"}},
            },
            "spec.parameters.gpu.rdma.resource",
        ),
        ({"provider": "local", "apps": {"llmd": {"enabled": "yes"}}}, "apps.llmd.enabled"),
        (
            {"provider": "local", "apps": {"globalEndpoint": {"tlsSecretName": "tls"}}},
            "apps.globalEndpoint.tlsSecretName needs host",
        ),
        (
            {"provider": "local", "apps": {"globalEndpoint": {"host": "10.0.0.1"}}},
            "must be a DNS name, not an IP address",
        ),
        (
            {"provider": "local", "apps": {"globalEndpoint": {"host": "Models.Example.com"}}},
            "apps.globalEndpoint.host",
        ),
    ],
)
def test_xrd_rejects_what_openapi_and_cel_can(
    parameters: dict, message: str, package: dict
) -> None:
    claim = {
        "apiVersion": "inference.devopstoolkit.ai/v1alpha1",
        "kind": "InferenceCluster",
        "metadata": {"name": "bad", "namespace": "a-team"},
        "spec": {"parameters": parameters},
    }
    report = validate_objects([claim], schema_paths=package["schemas"])
    assert not report.ok
    assert message in report.summary()
