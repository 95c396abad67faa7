"""llm-d's request path: the InferencePool over the model's vLLM pods, its endpoint picker
(Deployment, Service, EndpointPickerConfig, identity) and the HTTPRoute on the cluster's
Gateway."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Mapping
from typing import Any

import yaml

from function.backends.llmd.objects import labels, object_metadata, pool_selector
from function.backends.resources import ENGINE_PORT
from function.policy.llmd_profiles import data

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
        "metadata": object_metadata(name, namespace, model, labels_of, "endpoint-picker"),
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
    meta = object_metadata(name, namespace, model, labels_of, "router")
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
        "metadata": object_metadata(name, namespace, model, labels_of, "endpoint-picker"),
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
        "metadata": object_metadata(name, namespace, model, labels_of, "endpoint-picker"),
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
        "metadata": object_metadata(name, namespace, model, labels_of, "inference-pool"),
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
        "metadata": object_metadata(name, namespace, model, labels_of, "route"),
        "spec": spec,
    }
