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
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from function.backends.resources import (
    CACHE_MOUNT,
    ENGINE_PORT,
    MODEL_ANNOTATION,
    PART_OF,
    engine_env_vars,
    engine_probes,
    gpu_pod,
    model_fetch_container,
    per_pod_caches,
    secret_env_vars,
    with_shared_cache,
)
from function.policy.llmd_profiles import KEEP_ALIVE_ENV, KEEP_ALIVE_S, data

ROLE_LABEL: str = data()["disaggregation"]["roleLabel"]
COMPONENT = "llm-d-engine"

# Inference Extension v1.6.0 (api/v1/inferencepool_types.go).
POOL_API = "inference.networking.k8s.io/v1"
POOL_GROUP = "inference.networking.k8s.io"
ROUTE_API = "gateway.networking.k8s.io/v1"
# The endpoint picker's ports (llm-d-router v0.10.0 pkg/epp/server/options.go): the gateway's
# ext-proc gRPC, its health gRPC and metrics.
EPP_GRPC_PORT = 9002
EPP_HEALTH_PORT = 9003
EPP_METRICS_PORT = 9090
EPP_CONFIG_FILE = "epp-config.yaml"
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
EPP_READY_CEL = "has(object.status.availableReplicas) && object.status.availableReplicas >= 1"
ROUTE_READY_CEL = (
    "has(object.status.parents) && object.status.parents.exists(p, has(p.conditions) && "
    "p.conditions.exists(c, c.type == 'Accepted' && c.status == 'True'))"
)
# What the picker requests: stated, not measured. The v0.10.0 chart's (router.epp.resources:
# 8 CPUs and 8 GiB, limit 16 GiB) are for a shared, high-rate pool; one model's picker scores
# a handful of pods.
EPP_REQUESTS = {"cpu": "500m", "memory": "512Mi"}
EPP_LIMITS = {"memory": "2Gi"}
# A request may run this long before the gateway gives up (the v0.10.0 chart's
# httpRoute.requestTimeout, config/charts/llm-d-router-gateway/values.yaml).
ROUTE_TIMEOUT = "300s"


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


def _metadata(name: str, namespace: str, model: str, labels_of: str, component: str) -> dict:
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


# --- Endpoint picker -----------------------------------------------------------------------


def epp_config(profile: str, disaggregated: bool) -> dict[str, Any]:
    """The picker's EndpointPickerConfig (llm-d.ai/v1alpha1): the profile's scorers, and for
    a disaggregated model a prefill and a decode profile, each filtered to its pods' role, with
    the P/D handler and its decider (deploy/config/pd-epp-config.yaml)."""
    scorers: Mapping[str, int] = data()["profiles"][profile]["scorers"]
    weighted = [{"pluginRef": s, "weight": w} for s, w in scorers.items()]
    plugins: list[dict[str, Any]] = [{"type": s} for s in scorers]
    if not disaggregated:
        plugins.append({"type": "max-score-picker"})
        profiles_ = [{"name": "default", "plugins": [*weighted, {"pluginRef": "max-score-picker"}]}]
    else:
        pd = data()["disaggregation"]
        # The decider reads the prefix matches this producer records (the prefix scorer
        # would create it too, with its defaults).
        producer = {
            "type": "approx-prefix-cache-producer",
            "parameters": dict(pd["prefixProducer"]),
        }
        plugins = [producer, *plugins]
        plugins += [
            {"type": "prefill-filter"},
            {"type": "decode-filter"},
            {"type": "max-score-picker"},
            {
                "type": "disagg-profile-handler",
                "parameters": {"deciders": {"prefill": "prefix-based-pd-decider"}},
            },
            {
                "type": "prefix-based-pd-decider",
                "parameters": {"nonCachedTokens": int(pd["nonCachedTokens"])},
            },
        ]
        profiles_ = [
            {
                "name": role,
                "plugins": [
                    {"pluginRef": f"{role}-filter"},
                    {"pluginRef": "max-score-picker"},
                    *(dict(w) for w in weighted),
                ],
            }
            for role in ("prefill", "decode")
        ]
    return {
        "apiVersion": "llm-d.ai/v1alpha1",
        "kind": "EndpointPickerConfig",
        "plugins": plugins,
        "schedulingProfiles": profiles_,
    }


def config_problems(config: Mapping[str, Any]) -> list[str]:
    """What the picker at the pinned release would refuse in `config`: an unknown plugin type,
    a reference to a plugin not declared, a profile without plugins."""
    known = set(data()["pluginTypes"])
    declared = set()
    problems = []
    for p in config.get("plugins") or []:
        kind = p.get("type")
        if kind not in known:
            problems.append(f"plugin type {kind!r} is not registered by llm-d-router")
        declared.add(p.get("name") or kind)
    for profile in config.get("schedulingProfiles") or []:
        refs = [r.get("pluginRef") for r in profile.get("plugins") or []]
        if not refs:
            problems.append(f"profile {profile.get('name')!r} has no plugins")
        problems += [
            f"profile {profile.get('name')!r} refers to undeclared plugin {r!r}"
            for r in refs
            if r not in declared
        ]
    for p in config.get("plugins") or []:
        for ref in ((p.get("parameters") or {}).get("deciders") or {}).values():
            if ref not in declared:
                problems.append(f"{p.get('type')} refers to undeclared decider {ref!r}")
    return problems


@functools.cache
def epp_config_text(profile: str, disaggregated: bool) -> str:
    """The picker's configuration file: one per profile and mode, written once."""
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    return yaml.dump(epp_config(profile, disaggregated), Dumper=dumper, sort_keys=False)


def epp_config_map(
    *, name: str, namespace: str, model: str, labels_of: str, text: str
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _metadata(name, namespace, model, labels_of, "endpoint-picker"),
        "data": {EPP_CONFIG_FILE: text},
    }


def router_identity(
    *, name: str, namespace: str, model: str, labels_of: str
) -> list[dict[str, Any]]:
    """ServiceAccount, Role and RoleBinding of the model's llm-d router: its endpoint picker
    and its decode pods' routing sidecar read the pods and the pool (the picker also its
    objectives and rewrites), in the model's namespace only (the llm-d-router v0.10.0 chart's
    rbac.yaml; the sidecar's allowlist, pkg/sidecar/proxy/allowlist.go)."""
    read = ["get", "list", "watch"]
    meta = _metadata(name, namespace, model, labels_of, "router")
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": meta,
            "rules": [
                {"apiGroups": [""], "resources": ["pods"], "verbs": read},
                {"apiGroups": [POOL_GROUP], "resources": ["inferencepools"], "verbs": read},
                {
                    "apiGroups": ["llm-d.ai", "inference.networking.x-k8s.io"],
                    "resources": ["inferenceobjectives", "inferencemodelrewrites"],
                    "verbs": read,
                },
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
        },
    ]


def epp_deployment(
    *,
    name: str,
    namespace: str,
    model: str,
    labels_of: str,
    image: str,
    pool: str,
    service_account: str,
    config_map: str,
    config: str,
) -> dict[str, Any]:
    """The endpoint picker, as the llm-d-router v0.10.0 chart runs it for one replica
    (config/charts/routerlib/templates/_deployment.yaml): one active picker (its prefix
    bookkeeping is in memory), replaced at once on change (Recreate), gRPC probes on its
    health port. Metrics without authentication: checking tokens would need a ClusterRole
    (TokenReviews), which a model's identity may not create; so no profiler either."""
    pod_labels = labels(labels_of, "endpoint-picker") | {"app.kubernetes.io/instance": name}
    health = {"grpc": {"port": EPP_HEALTH_PORT, "service": "inference-extension"}}
    digest = hashlib.sha256(config.encode()).hexdigest()[:16]
    container = {
        "name": "epp",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "args": [
            "--pool-name",
            pool,
            "--pool-namespace",
            namespace,
            "--pool-group",
            POOL_GROUP,
            "--zap-encoder",
            "json",
            "--config-file",
            f"/config/{EPP_CONFIG_FILE}",
            "--grpc-health-port",
            str(EPP_HEALTH_PORT),
            "--metrics-endpoint-auth=false",
            # Its metrics port is open in the cluster: no profiler there (v0.10.0 turns
            # pprof on by default, pkg/epp/server/options.go).
            "--enable-pprof=false",
            "--tracing=false",
        ],
        "ports": [
            {"name": "grpc", "containerPort": EPP_GRPC_PORT},
            {"name": "grpc-health", "containerPort": EPP_HEALTH_PORT},
            {"name": "metrics", "containerPort": EPP_METRICS_PORT},
        ],
        # Probes and grace period as the v0.10.0 chart's (routerlib/templates/_deployment.yaml).
        "livenessProbe": {**health, "initialDelaySeconds": 5, "periodSeconds": 10},
        "readinessProbe": {**health, "periodSeconds": 2},
        "env": [
            {"name": "NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        ],
        "resources": {"requests": dict(EPP_REQUESTS), "limits": dict(EPP_LIMITS)},
        "volumeMounts": [{"name": "config", "mountPath": "/config", "readOnly": True}],
        "securityContext": {
            "runAsNonRoot": True,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
        },
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(name, namespace, model, labels_of, "endpoint-picker"),
        "spec": {
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": dict(pod_labels)},
            "template": {
                # The picker reads its configuration once: a new one restarts it.
                "metadata": {
                    "labels": dict(pod_labels),
                    "annotations": {"inference.devopstoolkit.ai/epp-config": digest},
                },
                "spec": {
                    "serviceAccountName": service_account,
                    "terminationGracePeriodSeconds": 130,
                    "containers": [container],
                    "volumes": [{"name": "config", "configMap": {"name": config_map}}],
                },
            },
        },
    }


def epp_service(*, name: str, namespace: str, model: str, labels_of: str) -> dict[str, Any]:
    """The picker's Service: the gateway calls it over gRPC (h2c) on 9002."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(name, namespace, model, labels_of, "endpoint-picker"),
        "spec": {
            "type": "ClusterIP",
            "selector": labels(labels_of, "endpoint-picker") | {"app.kubernetes.io/instance": name},
            "ports": [
                {
                    "name": "grpc-ext-proc",
                    "port": EPP_GRPC_PORT,
                    "targetPort": EPP_GRPC_PORT,
                    "protocol": "TCP",
                    "appProtocol": "kubernetes.io/h2c",
                },
                {
                    "name": "http-metrics",
                    "port": EPP_METRICS_PORT,
                    "targetPort": EPP_METRICS_PORT,
                    "protocol": "TCP",
                },
            ],
        },
    }


def inference_pool(
    *, name: str, namespace: str, model: str, labels_of: str, picker: str
) -> dict[str, Any]:
    """The model's InferencePool: its vLLM pods on port 8000 (a decode pod's sidecar), and
    its picker. FailOpen, as llm-d's chart: should the picker fail, the gateway still sends
    requests to the pool's pods rather than refusing them."""
    return {
        "apiVersion": POOL_API,
        "kind": "InferencePool",
        "metadata": _metadata(name, namespace, model, labels_of, "inference-pool"),
        "spec": {
            "selector": {"matchLabels": pool_selector(labels_of)},
            "targetPorts": [{"number": ENGINE_PORT}],
            "endpointPickerRef": {
                "kind": "Service",
                "name": picker,
                "port": {"number": EPP_GRPC_PORT},
                "failureMode": "FailOpen",
            },
        },
    }


def http_route(
    *,
    name: str,
    namespace: str,
    model: str,
    labels_of: str,
    pool: str,
    gateway: tuple[str, str],
    host: str | None,
    path_prefix: str | None,
) -> dict[str, Any]:
    """The model's HTTPRoute on the cluster's Gateway: its own host (ingressHost), or a path
    of the gateway's (`/<namespace>/<claim>`), stripped before the pool sees the request, so
    OpenAI clients use `<gateway>/<namespace>/<claim>/v1` as their base URL."""
    rule: dict[str, Any] = {
        "matches": [{"path": {"type": "PathPrefix", "value": path_prefix or "/"}}],
        "backendRefs": [{"group": POOL_GROUP, "kind": "InferencePool", "name": pool}],
        "timeouts": {"request": ROUTE_TIMEOUT},
    }
    if path_prefix:
        rule["filters"] = [
            {
                "type": "URLRewrite",
                "urlRewrite": {"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/"}},
            }
        ]
    spec: dict[str, Any] = {
        "parentRefs": [
            {
                "group": "gateway.networking.k8s.io",
                "kind": "Gateway",
                "name": gateway[1],
                "namespace": gateway[0],
            }
        ],
        "rules": [rule],
    }
    if host:
        spec["hostnames"] = [host]
    return {
        "apiVersion": ROUTE_API,
        "kind": "HTTPRoute",
        "metadata": _metadata(name, namespace, model, labels_of, "route"),
        "spec": spec,
    }


def engines_service(*, name: str, namespace: str, model: str, labels_of: str) -> dict[str, Any]:
    """A headless Service over every vLLM pod of the model: the StatefulSets' governing
    Service (stable pod names in DNS), and where KEDA reads each pod's metrics."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(name, namespace, model, labels_of, COMPONENT),
        "spec": {
            "clusterIP": "None",
            "selector": pool_selector(labels_of),
            "ports": [
                {"name": "http", "port": ENGINE_PORT, "targetPort": ENGINE_PORT, "protocol": "TCP"}
            ],
        },
    }


# --- vLLM pods -----------------------------------------------------------------------------


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
    image: str,
    sidecar_image: str | None,
    service: str,
    pool: str,
    service_account: str | None,
    replicas: int | None,
    args: Sequence[str],
    env: Sequence[tuple[str, str]],
    secret_env: Sequence[tuple[str, tuple[str, str]]],
    gpus: int,
    cpu: str,
    memory: str,
    shm_size: str,
    cache_size: str,
    cache_class: str | None,
    fetch_args: Sequence[str],
    fetch_requests: Mapping[str, str],
    fetch_memory_limit: str,
    node_selector: Mapping[str, str] | None,
    tolerations: Sequence[Mapping[str, Any]] | None,
    runtime_class: str | None,
    rdma_resource: str | None,
    startup_budget_s: int,
    shared_claim: str | None = None,
) -> dict[str, Any]:
    """A StatefulSet of one role's vLLM pods. Each pod has a model cache of its own
    (volumeClaimTemplates, deleted with the pod's ordinal), or all mount `shared_claim`
    (ReadWriteMany, filled by a Job before they start): pods of a role spread over nodes,
    which one ReadWriteOnce claim could not follow. An init container downloads the model
    (resumable, function/plan/model_fetch.py; on a filled cache it only checks) before vLLM starts.
    A decode pod runs llm-d's routing sidecar (a native sidecar) on the pool's port, vLLM
    behind it."""
    decode = role == "decode"
    vllm_port = DECODE_VLLM_PORT if decode else ENGINE_PORT
    secrets = secret_env_vars(secret_env)
    engine_env = engine_env_vars(env, secrets)
    if not any(e["name"] == KEEP_ALIVE_ENV for e in engine_env):
        engine_env.insert(0, {"name": KEEP_ALIVE_ENV, "value": str(KEEP_ALIVE_S)})
    if role in ("prefill", "decode"):
        engine_env[:0] = [
            {"name": NIXL_HOST_ENV, "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": NIXL_PORT_ENV, "value": str(NIXL_PORT)},
        ]
    gpu_resources = {"nvidia.com/gpu": str(gpus)}
    if rdma_resource and role in ("prefill", "decode"):
        gpu_resources[rdma_resource] = "1"
    vllm: dict[str, Any] = {
        "name": "vllm",
        "image": image,
        "command": ["vllm", "serve"],
        "args": list(args),
        "ports": [{"name": "http", "containerPort": vllm_port, "protocol": "TCP"}]
        + (
            [{"name": "nixl", "containerPort": NIXL_PORT, "protocol": "TCP"}]
            if role in ("prefill", "decode")
            else []
        ),
        "env": engine_env,
        "resources": {
            "requests": {"cpu": cpu, "memory": memory, **gpu_resources},
            "limits": {"memory": memory, **gpu_resources},
        },
        "volumeMounts": [
            {"name": "model-cache", "mountPath": CACHE_MOUNT},
            {"name": "shm", "mountPath": "/dev/shm"},
        ],
        # The init container has downloaded the weights: loading them remains.
        **engine_probes(vllm_port, startup_budget_s),
    }
    if rdma_resource and role in ("prefill", "decode"):
        # RDMA memory registration pins pages (llm-d's RDMA guide, docs/resources/rdma).
        vllm["securityContext"] = {"capabilities": {"add": ["IPC_LOCK"]}}
    # vllm/vllm-openai runs vLLM from its system Python.
    fetch = model_fetch_container(
        image=image,
        python="python3",
        fetch_args=fetch_args,
        fetch_requests=fetch_requests,
        fetch_memory_limit=fetch_memory_limit,
        secrets=secrets,
    )
    init = [fetch]
    if decode:
        assert sidecar_image is not None
        init.append(
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
    pod = gpu_pod(
        init=init,
        containers=[vllm],
        shm_size=shm_size,
        node_selector=node_selector,
        tolerations=tolerations,
        runtime_class=runtime_class,
    )
    # No container gets the service account's token but the one that needs it.
    pod["automountServiceAccountToken"] = False
    if service_account:
        pod["serviceAccountName"] = service_account
        pod["volumes"].append(sidecar_token_volume())
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": _metadata(name, namespace, model, labels_of, COMPONENT)
        | {"labels": pod_labels},
        "spec": {
            **({"replicas": replicas} if replicas is not None else {}),
            "serviceName": service,
            # Pods start together; one loading weights does not hold up the others.
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": dict(pod_labels)},
            "template": {
                "metadata": {"labels": dict(pod_labels), "annotations": {MODEL_ANNOTATION: model}},
                "spec": with_shared_cache(pod, shared_claim),
            },
            **per_pod_caches(cache_size, cache_class, shared_claim),
        },
    }
