"""Placement and spread on the plane: the fleet examples (examples/llm-placed.yaml,
llm-two-regions.yaml, llm-spillover.yaml) place their children on a fleet of two `existing`
clusters that are the plane itself, in two regions (the label
inference.devopstoolkit.ai/region), with the control plane's own cluster as the global
endpoint, as in the examples.

A placement picks Ready clusters, and a cluster is Ready when its Helm releases are. provider-
helm is not run here and no chart repository can be reached (docs/control-plane.md), so this
test stands in for it, in its own namespace only: it writes each Release's status as
provider-helm does once the chart is deployed (`atProvider.state: deployed`, Ready and Synced).
What that leaves unchecked is that the charts install; what the charts give the models here
(the CRDs, the production-stack operator, KEDA, the RuntimeClass) the plane has already.
Everything else is real: Crossplane lists the clusters for the function, the function places,
the children compose onto the clusters through their kubeconfigs, and the engines' pods run on
the H100 nodes the scheduler picks."""

from __future__ import annotations

import copy
import datetime
import json
from pathlib import Path
from typing import Any

import pytest
from applied_examples import DOCS, existing_secrets
from conftest import XR_API, remove, until

from dot_inference.controlplane import install
from dot_inference.controlplane.kube import Kube, KubeError, condition, is_true, wait
from dot_inference.controlplane.plane import Plane

ROOT = Path(__file__).resolve().parents[2]
NS = "fleet"
RELEASE = ("helm.m.crossplane.io/v1beta1", "Release")
FLEET_LABEL = "inference.devopstoolkit.ai/fleet"
REGION_LABEL = "inference.devopstoolkit.ai/region"
REGIONS = {"plane-a": "lab-east", "plane-b": "lab-west"}
FLEET_EXAMPLES = ("llm-placed.yaml", "llm-two-regions.yaml", "llm-spillover.yaml")
WITHIN = 300
# A model serving on its cluster: its download, then its engine, each observed through
# provider-kubernetes (a poll a minute) and Crossplane (whose watch circuit breaker holds back
# a busy XR's events to one a poll): about a minute here, minutes on a slower machine.
SERVING_WITHIN = 600


def _example(file: str) -> dict[str, Any]:
    return copy.deepcopy(next(d for f, d in DOCS if f == file))


def _fleet_cluster(name: str, fleet: str) -> dict[str, Any]:
    """examples/cluster-existing.yaml, in the fleet `fleet`, in region REGIONS[name], with
    KEDA (llm-two-regions autoscales)."""
    cluster = _example("cluster-existing.yaml")
    cluster["metadata"] = {
        "name": name,
        "namespace": NS,
        "labels": {FLEET_LABEL: fleet, REGION_LABEL: REGIONS[name]},
    }
    # One H100 node each: llm-two-regions autoscales to two engine pods, which share the
    # model's ReadWriteOnce cache only on one node (on two, the function refuses, naming
    # autoscaling.maxReplicas, since the cluster publishes no ReadWriteMany class).
    cluster["spec"]["parameters"]["gpu"]["maxNodes"] = 1
    apps = cluster["spec"]["parameters"]["apps"]
    apps["keda"] = {"enabled": True}
    # The global Gateway reaches a placement at its cluster's public host (an in-cluster
    # address is refused, naming this field).
    apps["vllm"]["endpoint"] = {"host": f"{name}.models.example.com"}
    return cluster


def _in_ns(doc: dict[str, Any]) -> dict[str, Any]:
    doc["metadata"]["namespace"] = NS
    return doc


def _deployed_by_the_suite(kube: Kube) -> int:
    """provider-helm's status for each Release not marked yet: the count marked."""
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    marked = 0
    for release in kube.list(*RELEASE, NS):
        if is_true(release, "Ready"):
            continue
        kube.patch_status(
            release,
            {
                "atProvider": {
                    "state": "deployed",
                    "revision": 1,
                    "releaseDescription": "marked deployed by the suite: provider-helm is "
                    "not run on this plane (tests/controlplane/test_8_fleet.py)",
                },
                "conditions": [
                    {"type": t, "status": "True", "reason": r, "lastTransitionTime": now}
                    for t, r in (("Ready", "Available"), ("Synced", "ReconcileSuccess"))
                ],
            },
        )
        marked += 1
    return marked


@pytest.fixture(scope="module")
def fleet(plane: Plane, kube: Kube) -> Any:
    install.namespace(kube, NS)
    for secret in existing_secrets(plane):
        kube.apply(_in_ns(secret))
    spill = _example("llm-spillover.yaml")["spec"]["parameters"]["spillover"][0]
    ref = spill["apiKeySecretRef"]
    kube.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            # Marked for the gateway by its owner, as the example says (the function refuses
            # to send an unmarked Secret to a third party).
            "metadata": {
                "name": ref["name"],
                "namespace": NS,
                "labels": {"inference.devopstoolkit.ai/gateway-key": "true"},
            },
            "stringData": {ref["key"]: "not-a-real-key"},
        }
    )
    fleet_name = _example("llm-placed.yaml")["spec"]["parameters"]["clusterSelector"][
        "matchLabels"
    ][FLEET_LABEL]
    clusters = [_fleet_cluster(n, fleet_name) for n in REGIONS]
    clusters.append(_in_ns(_example("cluster-control-plane.yaml")))
    for c in clusters:
        kube.apply(c)

    def ready() -> bool:
        try:
            _deployed_by_the_suite(kube)
        except KubeError as err:  # a CRD's storage still initialising (429): look again
            if err.status != 429:
                raise
            return False
        # The fleet's; the gateway's cluster is never Ready here (its Gateway waits for
        # agentgateway, a chart's controller), which a placement does not need.
        return all(
            is_true(kube.get(XR_API, "InferenceCluster", name, NS), "Ready") for name in REGIONS
        )

    until(ready, WITHIN, "the fleet's clusters Ready (their Releases marked deployed)", 2)
    yield clusters
    remove(kube, clusters)


@pytest.fixture
def applied(fleet: list[dict[str, Any]], kube: Kube, file: str) -> Any:
    """The example `file` in the fleet's namespace, alone: llm-two-regions and llm-spillover
    serve the same model, which one namespace's router on one cluster routes by name, so the
    function refuses the second on a cluster the first is on (as it would for a user)."""
    claim = _in_ns(_example(file))
    kube.apply(claim)
    yield claim
    remove(kube, [claim])


def _children(kube: Kube, claim: dict[str, Any]) -> list[dict[str, Any]]:
    name = claim["metadata"]["name"]
    return [
        x
        for x in kube.list(XR_API, "LLMInference", NS, selector=f"{FLEET_LABEL}={name}")
        if x["metadata"]["name"] != name
    ]


def _state(plane: Plane, kube: Kube, name: str) -> str:
    """What a person looks at when `name` does not serve: the plane's programs that stopped,
    its conditions, its engine's pods and where they are stuck, and the H100 nodes' free
    GPUs."""
    from dot_inference.controlplane.procs import alive

    xr = kube.get(XR_API, "LLMInference", name, NS) or {}
    stopped = sorted(n for n, pid in plane.procs.pids().items() if not alive(pid))
    lines = [f"  stopped: {', '.join(stopped) or 'none'} (logs in {plane.root / 'logs'})"] + [
        f"  {c.get('type')}={c.get('status')} {c.get('reason')}: {c.get('message', '')}"
        for c in (xr.get("status") or {}).get("conditions") or []
    ]
    for pod in kube.list("v1", "Pod", NS, selector=f"app={name}"):
        status = pod.get("status") or {}
        why = [
            f"{c.get('type')}={c.get('status')} {c.get('message', '')}"
            for c in status.get("conditions") or []
            if c.get("status") != "True"
        ]
        lines.append(
            f"  pod {pod['metadata']['name']} {status.get('phase')} on "
            f"{pod['spec'].get('nodeName')} {'; '.join(why)}"
        )
    gpu_pods: dict[str, int] = {}
    for pod in kube.list("v1", "Pod"):
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        node = pod["spec"].get("nodeName")
        for c in pod["spec"].get("containers") or []:
            asked = ((c.get("resources") or {}).get("limits") or {}).get("nvidia.com/gpu")
            if node and asked:
                gpu_pods[node] = gpu_pods.get(node, 0) + int(asked)
    for node in kube.list("v1", "Node"):
        labels = node["metadata"].get("labels") or {}
        if labels.get("nvidia.com/gpu.product") == "NVIDIA-H100-80GB-HBM3":
            n = node["metadata"]["name"]
            has = (node.get("status") or {}).get("allocatable", {}).get("nvidia.com/gpu")
            ready = condition(node, "Ready") or {}
            taints = [t.get("key") for t in node["spec"].get("taints") or []]
            lines.append(
                f"  node {n}: {gpu_pods.get(n, 0)} of {has} GPU(s) taken, Ready="
                f"{ready.get('status')}, unschedulable={node['spec'].get('unschedulable')}, "
                f"taints={taints}"
            )
    # What provider-kubernetes reads back from the cluster for the model (its Objects).
    for obj in kube.list("kubernetes.m.crossplane.io/v1alpha1", "Object", NS):
        if obj["metadata"]["name"].startswith(name):
            manifest = ((obj.get("status") or {}).get("atProvider") or {}).get("manifest") or {}
            said = [
                f"{c.get('type')}={c.get('status')} {c.get('message', '')}".strip()
                for c in (obj.get("status") or {}).get("conditions") or []
            ]
            lines.append(
                f"  Object {obj['metadata']['name']} ({manifest.get('kind')}): {'; '.join(said)}"
                f"; status {json.dumps(manifest.get('status'))[:300]}"
            )
    return "\n".join(lines)


def _serves_on_h100(plane: Plane, kube: Kube, name: str) -> None:
    """`name` serves, its engine's pods Running on the H100 nodes its cluster selects."""
    try:
        wait(
            lambda: is_true(kube.get(XR_API, "LLMInference", name, NS), "Serving"),
            SERVING_WITHIN,
            f"{name} serving on its cluster",
            2,
        )
    except TimeoutError as err:
        pytest.fail(f"{err}\n{_state(plane, kube, name)}")
    pods = kube.list("v1", "Pod", NS, selector=f"app={name}")
    running = [p for p in pods if p["status"].get("phase") == "Running"]
    assert running, f"{name}: no engine pod Running"
    for pod in running:
        node = kube.get("v1", "Node", pod["spec"]["nodeName"])
        assert node["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"


@pytest.mark.parametrize("file", FLEET_EXAMPLES)
def test_the_fleet_example_is_placed_and_serves(
    file: str, applied: dict[str, Any], plane: Plane, kube: Kube
) -> None:
    claim = applied
    name = claim["metadata"]["name"]
    placement = claim["spec"]["parameters"].get("placement")
    if placement is None:
        # One cluster, chosen by the rule: the claim itself runs there.
        xr = until(
            lambda: (
                (x := kube.get(XR_API, "LLMInference", name, NS))
                and (x.get("status") or {}).get("placement", {}).get("cluster")
                and x
            ),
            WITHIN,
            f"{name} placed on a cluster of its fleet",
            2,
        )
        assert xr["status"]["placement"]["cluster"] in REGIONS
        assert is_true(xr, "Placement"), condition(xr, "Placement")
        _serves_on_h100(plane, kube, name)
        return
    wanted = placement.get("clusters", 1)
    children = until(
        lambda: len(found := _children(kube, claim)) == wanted and found,
        WITHIN,
        f"{wanted} placement(s) of {name}",
        2,
    )
    on = sorted(c["spec"]["parameters"]["clusterRef"]["name"] for c in children)
    assert set(on) <= set(REGIONS), on
    if placement.get("spreadBy") == "region":
        assert len({REGIONS[c] for c in on}) == wanted, f"one per region: {on}"
    for child in children:
        cname = child["metadata"]["name"]
        assert cname == f"{name}-{child['spec']['parameters']['clusterRef']['name']}"
        _serves_on_h100(plane, kube, cname)
    parent = until(
        lambda: (
            (x := kube.get(XR_API, "LLMInference", name, NS))
            and len((x.get("status") or {}).get("placement", {}).get("placements") or []) == wanted
            and x
        ),
        WITHIN,
        f"{name}'s status lists its placements",
        2,
    )
    listed = sorted(p["cluster"] for p in parent["status"]["placement"]["placements"])
    assert listed == on
    assert is_true(parent, "Placement"), condition(parent, "Placement")
