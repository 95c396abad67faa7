"""Small builders for the objects an LLMInference composes. Plain dicts in, plain dicts out.

Field names follow the upstream schemas vendored in schemas/ (production-stack VLLMRuntime,
provider-kubernetes Object) and the Kubernetes API (Ingress, Namespace, Secret).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from function.claim.fields import SecretRef

PART_OF = "dot-inference"


# The model an object serves, as an annotation: a label would reach the pod selector, which
# must never change (below).
MODEL_ANNOTATION = "inference.devopstoolkit.ai/model"


# Pod annotation that changes whenever the engine's configuration does (see `vllm_runtime`).
CONFIG_HASH_ANNOTATION = "inference.devopstoolkit.ai/config-hash"


# Where an engine may run when the GPU pool is not known (a ProviderConfig or the control
# plane): every Linux node. The controller needs some node affinity (see `vllm_runtime`).
ANY_LINUX_NODE = {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}


# The production-stack operator serves on this container port and fronts it with a Service on
# port 80 named after the VLLMRuntime (operator internal/controller/vllmruntime_controller.go).
ENGINE_PORT = 8000


SERVICE_PORT = 80


GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


# A namespace we create on a remote cluster may hold things we did not create: never delete it.
NAMESPACE_POLICIES = ["Observe", "Create", "Update", "LateInitialize"]


def split_image(image: str) -> tuple[str, str]:
    """`docker.io/lmcache/vllm-openai:v1` -> (`docker.io`, `lmcache/vllm-openai:v1`): the
    operator joins registry and name with `/`."""
    registry, _, name = image.partition("/")
    return registry, name


def labels(name: str) -> dict[str, str]:
    """Labels of the engine: constant for the life of an LLMInference. The controller copies
    the VLLMRuntime's labels into its Deployment's selector, which the API server never lets
    change, so nothing a user can edit (the model) may be among them."""
    return {
        "app.kubernetes.io/name": name,
        "app.kubernetes.io/part-of": PART_OF,
        "app.kubernetes.io/component": "engine",
    }


def object_metadata(
    name: str, namespace: str, model: str, component: str | None = None
) -> dict[str, Any]:
    """metadata of an object that serves `model`: the engine's labels (another component
    when given) and the model as an annotation."""
    obj_labels = labels(name) | ({"app.kubernetes.io/component": component} if component else {})
    return {
        "name": name,
        "namespace": namespace,
        "labels": obj_labels,
        "annotations": {MODEL_ANNOTATION: model},
    }


def config_hash(spec: Mapping[str, Any]) -> str:
    """A digest of a VLLMRuntime spec without its replica count and pod annotations."""
    deployment = {
        k: v
        for k, v in (spec.get("deploymentConfig") or {}).items()
        if k not in ("replicas", "podAnnotations")
    }
    data = {**spec, "deploymentConfig": deployment}
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def engine_affinity(node_selector: Mapping[str, str] | None) -> list[dict[str, Any]]:
    """nodeSelectorTerms for the GPU pool's labels (any Linux node when none are known)."""
    selector = sorted((node_selector or {}).items())
    expressions = [{"key": k, "operator": "In", "values": [v]} for k, v in selector]
    return [{"matchExpressions": expressions or [dict(ANY_LINUX_NODE)]}]


def ingress(
    *, name: str, namespace: str, host: str, service: str, class_name: str | None, model: str
) -> dict[str, Any]:
    """An Ingress routing every path of `host` to the engine's Service."""
    spec: dict[str, Any] = {
        "rules": [
            {
                "host": host,
                "http": {
                    "paths": [
                        {
                            "path": "/",
                            "pathType": "Prefix",
                            "backend": {
                                "service": {"name": service, "port": {"number": SERVICE_PORT}}
                            },
                        }
                    ]
                },
            }
        ]
    }
    if class_name:
        spec["ingressClassName"] = class_name
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": object_metadata(name, namespace, model),
        "spec": spec,
    }


def namespace(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/part-of": PART_OF}},
    }


def secret_field_path(key: str) -> str:
    """A fieldpath to `data.<key>` that survives dots in the key."""
    return f"data.{key}" if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key) else f"data[{key}]"


def copied_secret(
    ref: SecretRef, source_namespace: str, name: str, namespace: str, type_: str = "Opaque"
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A Secret `namespace/name` for the target cluster and the Object references that copy
    into it the one key of `ref`, a Secret of `source_namespace` on the control plane, so no
    token is ever written into a manifest."""
    key, source_name = ref.key, ref.name
    manifest = {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": type_,
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/part-of": PART_OF},
        },
    }
    path = secret_field_path(key)
    references = [
        {
            "patchesFrom": {
                "apiVersion": "v1",
                "kind": "Secret",
                "name": source_name,
                "namespace": source_namespace,
                "fieldPath": path,
            },
            "toFieldPath": path,
        }
    ]
    return manifest, references


def wrap_in_object(
    manifest: Mapping[str, Any],
    *,
    name: str,
    provider_config: str,
    readiness_cel: str | None = None,
    management_policies: Sequence[str] | None = None,
    references: Sequence[Mapping[str, Any]] | None = None,
    watch: bool = False,
) -> dict[str, Any]:
    """A namespaced provider-kubernetes `Object` that applies `manifest` on another cluster."""
    spec: dict[str, Any] = {
        "forProvider": {"manifest": dict(manifest)},
        "providerConfigRef": {"kind": "ProviderConfig", "name": provider_config},
    }
    if readiness_cel:
        spec["readiness"] = {"policy": "DeriveFromCelQuery", "celQuery": readiness_cel}
    if management_policies:
        spec["managementPolicies"] = list(management_policies)
    if references:
        spec["references"] = [dict(r) for r in references]
    if watch:
        spec["watch"] = True
    return {
        "apiVersion": "kubernetes.m.crossplane.io/v1alpha1",
        "kind": "Object",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/part-of": PART_OF}},
        "spec": spec,
    }


# What a desired object may say about itself: everything else in metadata (uid,
# resourceVersion, generation, creationTimestamp, managedFields, ownerReferences,
# finalizers, but for the download Job's foregroundDeletion: cache_objects.py) is the API
# server's or Crossplane's to set, and a server-side apply that carries managedFields is
# rejected.
def usage(
    *, name: str, of: Mapping[str, Any], by: Mapping[str, Any], replay_deletion: bool = False
) -> dict[str, Any]:
    """A Usage of `of` by `by` (each apiVersion, kind, resourceRef): deleting `of` is refused
    while the Usage exists (Crossplane's webhook names the Usage, `<model>-uses-...`), and a
    deletion of the model waits for `by` to be gone before the Usage goes.

    `by` is one of the model's own composed resources, never the model: Crossplane's Usage
    controller keeps a composed Usage until its `by` is gone (internal/controller/protection/
    usage/reconciler.go at v2.3.4), and the Usage is a dependent that blocks its owner's
    deletion, so a foreground deletion of the model (`kubectl delete --cascade=foreground`,
    chainsaw's cleanup, Crossplane's own removal of a fleet's placement) would wait forever.
    With `replay_deletion`, a deletion refused meanwhile (its XR's, say) goes ahead once
    `by` is gone."""
    spec: dict[str, Any] = {"of": dict(of), "by": dict(by)}
    if replay_deletion:
        spec["replayDeletion"] = True
    return {
        "apiVersion": "protection.crossplane.io/v1beta1",
        "kind": "Usage",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/part-of": PART_OF}},
        "spec": spec,
    }


def cluster_usage(*, name: str, cluster: str, by: Mapping[str, Any]) -> dict[str, Any]:
    """A Usage that keeps the InferenceCluster `cluster` while the model's object `by` is on
    it, instead of tearing the cluster down under the model."""
    api = "inference.devopstoolkit.ai/v1alpha1"
    return usage(
        name=name,
        of={"apiVersion": api, "kind": "InferenceCluster", "resourceRef": {"name": cluster}},
        by=by,
    )


def engine_service(*, name: str, namespace: str, model: str) -> dict[str, Any]:
    """The Service in front of a simulated engine, as the operator makes one for a
    VLLMRuntime: named after it, port 80 to the pods' 8000."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": object_metadata(name, namespace, model),
        "spec": {
            "selector": labels(name),
            "ports": [
                {"name": "http", "port": SERVICE_PORT, "targetPort": ENGINE_PORT, "protocol": "TCP"}
            ],
        },
    }


def scaled_object(
    *,
    name: str,
    namespace: str,
    model: str,
    target: Mapping[str, str],
    min_replicas: int,
    max_replicas: int,
    triggers: list[Mapping[str, Any]],
    polling_interval_s: int,
    scale_down_delay_s: int,
    scale_down_policy: Mapping[str, Any],
) -> dict[str, Any]:
    """A KEDA ScaledObject that scales `target` (apiVersion, kind, name; a VLLMRuntime
    through its scale subresource, or a Deployment) on `triggers`.

    Its name is the model's, never `<runtime>-scaledobject`: the production-stack operator
    deletes the ScaledObject of that name on every reconcile of a VLLMRuntime without
    autoscalingConfig (operator/internal/controller/vllmruntime_controller.go)."""
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": object_metadata(name, namespace, model, component="autoscaler"),
        "spec": {
            "scaleTargetRef": dict(target),
            "minReplicaCount": min_replicas,
            "maxReplicaCount": max_replicas,
            "pollingInterval": polling_interval_s,
            "advanced": {
                "horizontalPodAutoscalerConfig": {
                    "behavior": {
                        "scaleDown": {
                            "stabilizationWindowSeconds": scale_down_delay_s,
                            "policies": [dict(scale_down_policy)],
                        }
                    }
                }
            },
            "triggers": [dict(t) for t in triggers],
        },
    }


def omit_replicas(runtime: dict[str, Any]) -> dict[str, Any]:
    """A VLLMRuntime (or Deployment) manifest without its replica count, for when KEDA owns
    it. provider-kubernetes (and Crossplane) apply server-side: a field in the manifest is
    owned by the apply and forced back on every sync, so a count KEDA set through the scale
    subresource would be reverted; a field left out stays the autoscaler's (and the CRD
    defaults it to 1 when no one owns it)."""
    out = json.loads(json.dumps(runtime))
    if out.get("kind") == "VLLMRuntime":
        (out.get("spec") or {}).get("deploymentConfig", {}).pop("replicas", None)
    else:
        (out.get("spec") or {}).pop("replicas", None)
    return out
