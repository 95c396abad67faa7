"""The llm-d backend (LLMInference `backend: llmd`), as plain manifests.

llm-d serves a model through the Gateway API Inference Extension instead of the production
stack's router. For each model:

- its vLLM pods: StatefulSets whose pods each fill a model cache of their own (an init
  container downloads the model, as a multi-node replica's pods do), one for an aggregated
  model, one of prefill and one of decode pods for a disaggregated one;
- an `InferencePool` (inference.networking.k8s.io/v1, Inference Extension v1.6.0) selecting
  those pods and naming their endpoint picker;
- the endpoint picker (llm-d-router v0.10.0): a Deployment, its Service, its
  `EndpointPickerConfig` (scorers of the claim's profile, function/policy/llmd.yaml) and an identity
  that may read the pods and the pool, nothing else;
- an `HTTPRoute` on the InferenceCluster's Gateway (apps.llmd) with the pool as backend.

Disaggregated, prefill pods hand their KV cache to decode pods over NIXL (vLLM 0.17.1
`NixlConnector`); a decode pod runs llm-d's routing sidecar in front of vLLM, which asks the
prefill pod the picker chose (header `x-prefiller-host-port`) before decoding locally.

This module: labels and names shared by every llm-d object, and the vLLM pods (StatefulSets)
and their Service; function/backends/llmd/picker.py: the pool, picker and route.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from function.backends.cache_objects import (
    per_pod_caches,
    with_shared_cache,
)
from function.backends.pods import VllmPod, vllm_pod
from function.backends.resources import ENGINE_PORT, MODEL_ANNOTATION, PART_OF
from function.policy.llmd_profiles import KEEP_ALIVE_ENV, KEEP_ALIVE_S, data

ROLE_LABEL: str = data()["disaggregation"]["roleLabel"]


COMPONENT = "llm-d-engine"


# Decode pods: the routing sidecar takes the pool's port, vLLM moves behind it (the sidecar's
# defaults, pkg/sidecar/proxy/options.go `--port` 8000, `--model-server-port` 8200).
DECODE_VLLM_PORT = 8200


# The KV connector vLLM and the sidecar speak: vLLM 0.17.1 `NixlConnector`
# (docs/features/nixl_connector_usage.md), the sidecar's `nixlv2` (constants.go).
KV_CONNECTOR = "NixlConnector"


SIDECAR_CONNECTOR = "nixlv2"


# NIXL's side channel: the pod's address (vllm/envs.py VLLM_NIXL_SIDE_CHANNEL_HOST, default
# localhost, which another pod cannot reach); its port stays vLLM's default, 5600.
NIXL_HOST_ENV = "VLLM_NIXL_SIDE_CHANNEL_HOST"


# Its port, stated and declared (vllm/envs.py VLLM_NIXL_SIDE_CHANNEL_PORT, default 5600; one
# listener serves every TP rank's metadata, + the data-parallel index:
# kv_connector/v1/nixl_connector.py at v0.17.1). llm-d's P/D guide declares it `nixl`.
NIXL_PORT_ENV = "VLLM_NIXL_SIDE_CHANNEL_PORT"


NIXL_PORT = 5600


# The token the routing sidecar reads the pool's pods with (--enable-ssrf-protection), mounted
# into the sidecar alone: vLLM needs no API access. What the kubelet mounts by default.
TOKEN_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"


TOKEN_VOLUME = "sidecar-token"


ENGINE_READY_CEL = "has(object.status.readyReplicas) && object.status.readyReplicas >= 1"


@dataclass(frozen=True)
class Role:
    """One kind of vLLM pod of a model: `aggregated` (serves whole requests), `prefill` or
    `decode`."""

    name: str
    replicas: int | None  # None: KEDA owns the count
    gpus: int
    args: tuple[str, ...]


def labels(name: str, component: str | None = None) -> dict[str, str]:
    """Labels of a model's llm-d objects; its vLLM pods are `llm-d-engine`, apart from the
    production stack's `engine` pods, which its router discovers."""
    return {
        "app.kubernetes.io/name": name,
        "app.kubernetes.io/part-of": PART_OF,
        "app.kubernetes.io/component": component or COMPONENT,
    }


def object_metadata(name: str, namespace: str, model: str, labels_of: str, component: str) -> dict:
    return {
        "name": name,
        "namespace": namespace,
        "labels": labels(labels_of, component),
        "annotations": {MODEL_ANNOTATION: model},
    }


def pool_selector(name: str) -> dict[str, str]:
    """What the InferencePool selects: every vLLM pod of the model, whatever its role."""
    return labels(name)


def role_labels(name: str, role: str) -> dict[str, str]:
    """A vLLM pod's labels: the pool's, and its role for the picker's prefill and decode
    filters (an aggregated pod is `prefill-decode`, which either accepts; `both` is its
    deprecated spelling: filter/bylabel/roles.go)."""
    return pool_selector(name) | {ROLE_LABEL: AGGREGATED_ROLE if role == "aggregated" else role}


AGGREGATED_ROLE = "prefill-decode"


def group_name(
    name: str, role: str, cache_size: str, cache_class: str | None, shared: bool = False
) -> str:
    """A StatefulSet's name: short enough for its pods' and revisions' labels (63 characters
    with `-<ordinal>` and `-<10-character hash>`), and new when its model cache changes (a
    StatefulSet's volumeClaimTemplates cannot; `shared`: the pods mount one shared claim
    instead), so Crossplane replaces it instead of retrying an update the API server refuses."""
    # The whole name is in the digest: two claims whose names share their first 36
    # characters get two StatefulSets.
    # Pods on a shared claim have no claim templates: its size is not theirs.
    what = f"{name}/shared/{cache_class}" if shared else f"{name}/{cache_size}/{cache_class}"
    digest = hashlib.sha256(what.encode()).hexdigest()[:6]
    short = {"aggregated": "vllm", "prefill": "prefill", "decode": "decode"}[role]
    return f"{name[:36].rstrip('-')}-{short}-{digest}"


def engines_service(*, name: str, namespace: str, model: str, labels_of: str) -> dict[str, Any]:
    """A headless Service over every vLLM pod of the model: the StatefulSets' governing
    Service (stable pod names in DNS), and where KEDA reads each pod's metrics."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": object_metadata(name, namespace, model, labels_of, COMPONENT),
        "spec": {
            "clusterIP": "None",
            "selector": pool_selector(labels_of),
            "ports": [
                {"name": "http", "port": ENGINE_PORT, "targetPort": ENGINE_PORT, "protocol": "TCP"}
            ],
        },
    }


def kv_transfer_config(role: str) -> str:
    """`--kv-transfer-config` of a prefill or decode pod (vLLM 0.17.1 config/kv_transfer.py;
    NixlConnector ignores the role, the router decides who prefills; llm-d's guide writes
    kv_producer for prefill and kv_both for decode)."""
    kv_role = "kv_producer" if role == "prefill" else "kv_both"
    return json.dumps({"kv_connector": KV_CONNECTOR, "kv_role": kv_role}, separators=(",", ":"))


def sidecar_token_volume() -> dict[str, Any]:
    """The service account's token, its cluster's CA and the namespace, as the kubelet
    projects them by default (a bound token, refreshed), for the routing sidecar alone."""
    return {
        "name": TOKEN_VOLUME,
        "projected": {
            "sources": [
                # 3607 s: what the kubelet's own default token volume asks for (the
                # ServiceAccount admission plugin's kube-api-access-* projected volume).
                {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
                {
                    "configMap": {
                        "name": "kube-root-ca.crt",
                        "items": [{"key": "ca.crt", "path": "ca.crt"}],
                    }
                },
                {
                    "downwardAPI": {
                        "items": [
                            {"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}
                        ]
                    }
                },
            ]
        },
    }


def engine_statefulset(
    *,
    name: str,
    labels_of: str,
    role: str,
    namespace: str,
    model: str,
    sidecar_image: str | None,
    service: str,
    pool: str,
    service_account: str | None,
    replicas: int | None,
    rdma_resource: str | None,
    pod: VllmPod,
) -> dict[str, Any]:
    """A StatefulSet of one role's vLLM pods, each a `pod` (function/backends/pods.py). Each
    pod has a model cache of its own (volumeClaimTemplates, deleted with the pod's ordinal),
    or all mount the shared claim (ReadWriteMany, filled by a Job before they start): pods of
    a role spread over nodes, which one ReadWriteOnce claim could not follow. An init
    container fills the cache (function/backends/weights.py; on a filled cache it only checks)
    before vLLM starts. A decode pod runs llm-d's routing sidecar (a native sidecar) on the
    pool's port, vLLM behind it."""
    decode = role == "decode"
    disaggregated = role in ("prefill", "decode")
    vllm_port = DECODE_VLLM_PORT if decode else ENGINE_PORT
    sidecars: list[dict[str, Any]] = []
    if decode:
        assert sidecar_image is not None
        sidecars.append(
            {
                "name": "routing-proxy",
                "image": sidecar_image,
                "imagePullPolicy": "IfNotPresent",
                # A native sidecar: it starts first and runs beside vLLM.
                "restartPolicy": "Always",
                "args": [
                    f"--port={ENGINE_PORT}",
                    f"--model-server-port={DECODE_VLLM_PORT}",
                    f"--kv-connector={SIDECAR_CONNECTOR}",
                    "--secure-proxy=false",
                    # Calls only pods of this model's pool, whatever a request's header
                    # names (pkg/sidecar/proxy/allowlist.go).
                    "--enable-ssrf-protection=true",
                    f"--inference-pool={namespace}/{pool}",
                ],
                "ports": [{"name": "proxy", "containerPort": ENGINE_PORT, "protocol": "TCP"}],
                # It listens only once its allowlist has synced: the pod is not ready before
                # (pkg/sidecar/proxy/proxy.go `GET /health`).
                "readinessProbe": {
                    "httpGet": {"path": "/health", "port": ENGINE_PORT},
                    "periodSeconds": 5,
                    "failureThreshold": 3,
                },
                # Stated, not measured: a Go reverse proxy for one pod's requests.
                "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}},
                "securityContext": {
                    "runAsNonRoot": True,
                    "allowPrivilegeEscalation": False,
                    "capabilities": {"drop": ["ALL"]},
                },
                "volumeMounts": [
                    {"name": TOKEN_VOLUME, "mountPath": TOKEN_MOUNT, "readOnly": True}
                ],
            }
        )
    pod_labels = role_labels(labels_of, role)
    nixl = [
        {"name": NIXL_HOST_ENV, "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": NIXL_PORT_ENV, "value": str(NIXL_PORT)},
    ]
    rdma = rdma_resource if disaggregated else None
    spec = vllm_pod(
        pod,
        command=["vllm", "serve"],
        port=vllm_port,
        extra_ports=[{"name": "nixl", "containerPort": NIXL_PORT, "protocol": "TCP"}]
        if disaggregated
        else [],
        env_first=nixl if disaggregated else [],
        env_defaults=[(KEEP_ALIVE_ENV, str(KEEP_ALIVE_S))],
        extra_resources={rdma: "1"} if rdma else None,
        # RDMA memory registration pins pages (llm-d's RDMA guide, docs/resources/rdma).
        security_context={"capabilities": {"add": ["IPC_LOCK"]}} if rdma else None,
        sidecars=sidecars,
    )
    # No container gets the service account's token but the one that needs it.
    spec["automountServiceAccountToken"] = False
    if service_account:
        spec["serviceAccountName"] = service_account
        spec["volumes"].append(sidecar_token_volume())
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": object_metadata(name, namespace, model, labels_of, COMPONENT)
        | {"labels": pod_labels},
        "spec": {
            **({"replicas": replicas} if replicas is not None else {}),
            "serviceName": service,
            # Pods start together; one loading weights does not hold up the others.
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": dict(pod_labels)},
            "template": {
                "metadata": {"labels": dict(pod_labels), "annotations": {MODEL_ANNOTATION: model}},
                "spec": with_shared_cache(spec, pod.shared_claim),
            },
            **per_pod_caches(pod.cache_size, pod.cache_class, pod.shared_claim),
        },
    }
