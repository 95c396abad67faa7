"""GPUs on the plane, after the examples are gone (their pods would take the GPUs these need):

- **A replica over two nodes.** The multi-node example's claim (examples/
  llm-deepseek-v3-multinode.yaml: DeepSeek-V3 on 16 GPUs), on an `existing` cluster that is
  the plane's reserved H200 pair, runs apps.lws: the real LeaderWorkerSet controller makes of
  its LeaderWorkerSet a leader and a worker pod, which the scheduler puts on the two H200
  nodes, and the claim serves once the group is ready. Deleting it completes.
- **The GPU budget holds.** A model that needs a whole H100 node, while every H100 node has a
  GPU taken (another team's pods), stays Pending; the claim says why in the scheduler's words,
  and serves once a node is free."""

from __future__ import annotations

import base64
import copy
from pathlib import Path
from typing import Any

import pytest
from conftest import XR_API, remove, until

from dot_inference.controlplane import install
from dot_inference.controlplane.kube import Kube, condition, is_true
from dot_inference.controlplane.nodes import nodes
from dot_inference.controlplane.plane import Plane

ROOT = Path(__file__).resolve().parents[2]
RESERVED = {"key": "dot-inference.dev/reserved", "operator": "Equal", "value": "multi-node"}
WITHIN = 300


def _gpu_nodes(product: str) -> list[str]:
    return [
        n["metadata"]["name"]
        for n in nodes()
        if n["metadata"]["labels"].get("nvidia.com/gpu.product") == product
    ]


def _plane_secret(plane: Plane, ns: str) -> dict[str, Any]:
    kubeconfig = plane.pki.embedded_kubeconfig("crossplane", plane.server)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {"name": "plane", "namespace": ns},
        "data": {"kubeconfig": base64.b64encode(kubeconfig.encode()).decode()},
    }


@pytest.fixture
def h200_pair(plane: Plane, kube: Kube) -> Any:
    ns = "multinode"
    install.namespace(kube, ns)
    kube.apply(_plane_secret(plane, ns))
    cluster = {
        "apiVersion": XR_API,
        "kind": "InferenceCluster",
        "metadata": {"name": "h200-pair", "namespace": ns},
        "spec": {
            "parameters": {
                "provider": "existing",
                "kubeconfigSecretRef": {"name": "plane", "key": "kubeconfig"},
                "modelsKubeconfigSecretRef": {"name": "plane"},
                "gpu": {
                    "enabled": True,
                    "type": "h200",
                    "perNode": 8,
                    "maxNodes": 2,
                    "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H200"},
                    "tolerations": [{**RESERVED, "effect": "NoSchedule"}],
                },
                "apps": {
                    "nvidia": {"enabled": False},
                    "vllm": {"enabled": True},
                    "lws": {"enabled": True},
                    "keda": {"enabled": False},
                    "ingress": {"enabled": False},
                },
            }
        },
    }
    kube.apply(cluster)
    yield ns, cluster
    remove(kube, [cluster])


def test_a_replica_over_two_nodes_is_a_leader_and_a_worker_on_two_gpu_nodes(
    kube: Kube, h200_pair: Any
) -> None:
    ns, cluster = h200_pair
    (example,) = install.load([ROOT / "examples" / "llm-deepseek-v3-multinode.yaml"])
    claim = copy.deepcopy(example)
    claim["metadata"]["namespace"] = ns
    claim["spec"]["parameters"]["clusterRef"] = {"name": cluster["metadata"]["name"]}
    name = claim["metadata"]["name"]
    kube.apply(claim)

    def group() -> list[dict[str, Any]]:
        pods = kube.list("v1", "Pod", ns, selector=f"app.kubernetes.io/name={name}")
        return [p for p in pods if "leaderworkerset.sigs.k8s.io/name" in p["metadata"]["labels"]]

    until(
        lambda: (
            len(running := [p for p in group() if p["status"].get("phase") == "Running"]) == 2
            and running
        ),
        WITHIN,
        "the LeaderWorkerSet's leader and worker Running",
        interval=1,
    )
    pods = group()
    roles = sorted(
        p["metadata"]["labels"].get("leaderworkerset.sigs.k8s.io/worker-index") for p in pods
    )
    assert roles == ["0", "1"], roles  # index 0 is the leader
    assert len({p["spec"]["nodeName"] for p in pods}) == 2, "one replica spans two nodes"
    assert {p["spec"]["nodeName"] for p in pods} <= set(_gpu_nodes("NVIDIA-H200"))
    assert all(
        int(p["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"]) == 8
        for p in pods
    )
    (lws,) = kube.list("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", ns)
    assert lws["spec"]["leaderWorkerTemplate"]["size"] == 2
    until(
        lambda: is_true(kube.get(XR_API, "LLMInference", name, ns), "Serving"),
        WITHIN,
        f"{name} serving: its LeaderWorkerSet's ready group, observed by provider-kubernetes",
        interval=2,
    )
    serving = condition(kube.get(XR_API, "LLMInference", name, ns), "Serving")
    assert "LeaderWorkerSet" in serving["message"] and "1 replica(s) serving" in serving["message"]
    remove(kube, [claim])
    until(lambda: not group(), WITHIN, "the group's pods gone with the claim")


@pytest.fixture
def every_h100_node_has_a_gpu_taken(kube: Kube) -> Any:
    """Another team's pods: one GPU on each H100 node."""
    ns = "another-team"
    install.namespace(kube, ns)
    blockers = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"gpu-job-{node}", "namespace": ns},
            "spec": {
                "nodeName": node,
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
                "containers": [
                    {
                        "name": "job",
                        "image": "busybox",
                        "resources": {"limits": {"nvidia.com/gpu": "1"}},
                    }
                ],
            },
        }
        for node in _gpu_nodes("NVIDIA-H100-80GB-HBM3")
    ]
    for pod in blockers:
        kube.apply(pod)
    yield blockers
    remove(kube, blockers)


def test_a_model_that_needs_a_whole_node_stays_pending_and_says_why(
    kube: Kube, every_h100_node_has_a_gpu_taken: list[dict[str, Any]]
) -> None:
    ns = "budget"
    install.namespace(kube, ns)
    claim = {
        "apiVersion": XR_API,
        "kind": "LLMInference",
        "metadata": {"name": "qwen3-32b", "namespace": ns},
        "spec": {"parameters": {"model": "Qwen/Qwen3-32B", "gpu": 8}},
    }
    kube.apply(claim)

    def serving() -> dict[str, Any]:
        return condition(kube.get(XR_API, "LLMInference", "qwen3-32b", ns), "Serving") or {}

    until(
        lambda: "cannot be scheduled" in serving().get("message", ""),
        WITHIN,
        "the claim saying why its pod cannot be scheduled",
        interval=1,
    )
    message = serving()["message"]
    assert serving()["status"] == "False"
    assert "Insufficient nvidia.com/gpu" in message, message
    assert not is_true(kube.get(XR_API, "LLMInference", "qwen3-32b", ns), "Ready")
    # Another team's job ends: a node is whole again, and the model starts there.
    blocker = every_h100_node_has_a_gpu_taken[0]
    kube.delete("v1", "Pod", blocker["metadata"]["name"], blocker["metadata"]["namespace"])
    until(
        lambda: is_true(kube.get(XR_API, "LLMInference", "qwen3-32b", ns), "Ready"),
        WITHIN,
        "the claim Ready once a node is free",
        interval=1,
    )
    (pod,) = [
        p
        for p in kube.list("v1", "Pod", ns, selector="app.kubernetes.io/name=qwen3-32b")
        if p["metadata"]["labels"].get("app.kubernetes.io/component") == "engine"
    ]
    assert pod["spec"]["nodeName"] == blocker["spec"]["nodeName"]
    remove(kube, [claim])
