"""Small builders for the objects an LLMInference composes. Plain dicts in, plain dicts out.

Field names follow the upstream schemas vendored in schemas/ (production-stack VLLMRuntime,
provider-kubernetes Object) and the Kubernetes API (Ingress, Namespace, Secret).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from function.plan import model_fetch

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
# Ready means serving: at least one engine replica passed its /health readiness probe.
RUNTIME_READY_CEL = "has(object.status.availableReplicas) && object.status.availableReplicas >= 1"
# The model cache volume inside the engine and the download Job: the Hugging Face cache
# (weights) and vLLM's own cache (torch.compile, CUDA graphs) live there.
CACHE_MOUNT = "/data"
CACHE_ENV = (("HF_HOME", f"{CACHE_MOUNT}/huggingface"), ("VLLM_CACHE_ROOT", f"{CACHE_MOUNT}/vllm"))


# The download Job's program (function/plan/model_fetch.py), run by the engine image's Python.
def _program(path: Path) -> str:
    """A module's source without its docstring (documentation stays in the file)."""
    import ast

    source = path.read_text()
    body = ast.parse(source).body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        source = "\n".join(source.splitlines()[body[0].end_lineno :])
    return source.strip() + "\n"


FETCH_SCRIPT = _program(Path(model_fetch.__file__))
ENGINE_PYTHON = "/opt/venv/bin/python"
# Ready means the download finished.
JOB_DONE_CEL = "has(object.status.succeeded) && object.status.succeeded >= 1"
# The variable the production-stack controller fills from `model.hfTokenSecret` (the only
# one it takes from a Secret: vllmConfig.env holds literal values only).
ENGINE_SECRET_ENV = "HF_TOKEN"
# A namespace we create on a remote cluster may hold things we did not create: never delete it.
NAMESPACE_POLICIES = ["Observe", "Create", "Update", "LateInitialize"]


def dns_label(name: str) -> str:
    """`name` as a DNS-1035 label (Service names): lowercase, [a-z0-9-], starts with a
    letter, at most 63 characters; a short hash keeps shortened names distinct."""
    label = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")
    if not label or not label[0].isalpha():
        label = f"llm-{label}".rstrip("-")
    if label == name and len(label) <= 63:
        return label
    digest = hashlib.sha256(name.encode()).hexdigest()[:5]
    return f"{label[:57].rstrip('-')}-{digest}"


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


def _metadata(
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


def vllm_runtime(
    *,
    name: str,
    namespace: str,
    model: str,
    image: str,
    gpus: int,
    cpu: str,
    memory: str,
    shm_size: str,
    dtype: str,
    gpu_memory_utilization: float,
    max_model_len: int | None,
    tool_call_parser: str | None,
    enable_prefix_caching: bool,
    enable_chunked_prefill: bool,
    extra_args: Sequence[str],
    env: Sequence[tuple[str, str]],
    engine_secret: tuple[str, str] | None,
    node_selector: Mapping[str, str] | None = None,
    tolerations: Sequence[Mapping[str, Any]] | None = None,
    cache: tuple[str, str | None] | None = None,
    cache_access_mode: str = "ReadWriteOnce",
    replicas: int | None = 1,
    runtime_class: str | None = None,
) -> dict[str, Any]:
    """A production-stack `VLLMRuntime` (one replica), shaped for the controller at the
    pinned commit (operator/internal/controller/vllmruntime_controller.go):

    - `nodeSelectorTerms` is always set: its update check dereferences the pod's node
      affinity and panics without it (then it never writes status);
    - it rolls the Deployment out only for changes of the model, port, image, resources,
      node affinity, tolerations, runtime class, `/dev/shm` or pod annotations, never of the
      other arguments or variables: a pod annotation carries a digest of the whole spec, so
      every change rolls out;
    - the labels never change (`labels`);
    - `cache` (size, storage class) mounts the model cache claim, named after the runtime as
      the controller expects, at /data; the size must be the claim's current size (the
      controller rewrites the claim when they differ, which the API server refuses);
    - `replicas` 0 while the model downloads: the Deployment exists, no pod starts; None
      when KEDA owns the count (autoscaling): the field is left out, so the apply never
      takes it back from the autoscaler (`omit_replicas`);
    - `runtime_class`: the cluster's RuntimeClass for GPU pods (None: the CRD's default,
      `nvidia`, which the NVIDIA GPU Operator creates);
    - `engine_secret` (name, key): the one Secret the controller gives the engine, as the
      variable `ENGINE_SECRET_ENV` (`model.hfTokenSecret`): the Hugging Face token, or vLLM's
      API key when the claim sets one (the download Job fetched the weights then).
    """
    registry, image_name = split_image(image)
    model_spec: dict[str, Any] = {"modelURL": model, "dtype": dtype}
    if max_model_len:
        model_spec["maxModelLen"] = max_model_len
    if tool_call_parser:
        model_spec["enableTool"] = True
        model_spec["toolCallParser"] = tool_call_parser
    if engine_secret:
        model_spec["hfTokenSecret"] = {
            "hfTokenSecretName": engine_secret[0],
            "hfTokenKeyName": engine_secret[1],
        }
    vllm_config: dict[str, Any] = {
        # The operator sets VLLM_USE_V1=0 unless v1 is true; vLLM's V0 engine is gone.
        "v1": True,
        "port": ENGINE_PORT,
        "gpuMemoryUtilization": f"{gpu_memory_utilization:g}",
        # The operator passes --no-enable-* when these are false: state them explicitly.
        "enablePrefixCaching": enable_prefix_caching,
        "enableChunkedPrefill": enable_chunked_prefill,
    }
    if gpus > 1:
        vllm_config["tensorParallelSize"] = gpus
    if extra_args:
        vllm_config["extraArgs"] = list(extra_args)
    env = [*(CACHE_ENV if cache else ()), *env]
    if env:
        vllm_config["env"] = [{"name": k, "value": v} for k, v in env]
    deployment: dict[str, Any] = {
        **({"replicas": replicas} if replicas is not None else {}),
        # A rolling update needs a second set of GPUs that a GPU pool rarely has free.
        "deploymentStrategy": "Recreate",
        "image": {"registry": registry, "name": image_name},
        "resources": {"cpu": cpu, "memory": memory, "gpu": str(gpus)},
        "shmSize": shm_size,
        "toleration": [dict(t) for t in (tolerations or [GPU_TOLERATION])],
    }
    deployment["nodeSelectorTerms"] = engine_affinity(node_selector)
    if runtime_class:
        deployment["runtimeClass"] = runtime_class
    spec: dict[str, Any] = {
        "model": model_spec,
        "vllmConfig": vllm_config,
        "deploymentConfig": deployment,
    }
    if cache:
        storage = {
            "enabled": True,
            "size": cache[0],
            # The CRD defaults to ReadWriteMany, which most clouds' block storage cannot bind:
            # always stated (function/plan/storage.py `one_claim_layout` picks it).
            "accessMode": cache_access_mode,
            "mountPath": CACHE_MOUNT,
        }
        if cache[1]:
            storage["storageClassName"] = cache[1]
        spec["storageConfig"] = storage
    deployment["podAnnotations"] = {CONFIG_HASH_ANNOTATION: config_hash(spec)}
    return {
        "apiVersion": "production-stack.vllm.ai/v1alpha1",
        "kind": "VLLMRuntime",
        "metadata": _metadata(name, namespace, model),
        "spec": spec,
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


def engine_affinity(node_selector: Mapping[str, str] | None) -> list[dict[str, Any]]:
    """nodeSelectorTerms for the GPU pool's labels (any Linux node when none are known)."""
    selector = sorted((node_selector or {}).items())
    expressions = [{"key": k, "operator": "In", "values": [v]} for k, v in selector]
    return [{"matchExpressions": expressions or [dict(ANY_LINUX_NODE)]}]


def model_cache_claim(
    *,
    name: str,
    namespace: str,
    model: str,
    size: str,
    class_name: str | None,
    access_mode: str = "ReadWriteOnce",
) -> dict[str, Any]:
    """The model cache: a claim named after the runtime (the controller mounts the claim of
    that name), ReadWriteOnce or, shared by pods on several nodes, ReadWriteMany."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": _metadata(name, namespace, model, component="model-cache"),
        "spec": _cache_claim_spec(size, class_name, access_mode),
    }


def _cache_claim_spec(
    size: str, class_name: str | None, access_mode: str = "ReadWriteOnce"
) -> dict[str, Any]:
    return {
        "accessModes": [access_mode],
        "resources": {"requests": {"storage": size}},
        **({"storageClassName": class_name} if class_name else {}),
    }


def fetch_job_name(
    name: str,
    model: str,
    image: str,
    hf_token: tuple[str, str] | None,
    revision: str | None = None,
) -> str:
    """The download Job's name: a digest of what it downloads with, so a change runs a new
    Job (a Job's template cannot change)."""
    what = [model, image, hf_token] + ([revision] if revision else [])
    digest = hashlib.sha256(json.dumps(what).encode()).hexdigest()[:8]
    return f"{name[:47].rstrip('-')}-fetch-{digest}"


def model_fetch_job(
    *,
    name: str,
    job_name: str,
    namespace: str,
    model: str,
    image: str,
    hf_token: tuple[str, str] | None,
    node_selector: Mapping[str, str] | None,
    tolerations: Sequence[Mapping[str, Any]] | None,
    deadline_seconds: int,
    requests: Mapping[str, str],
    memory_limit: str,
    revision: str | None = None,
    colocate: bool = False,
) -> dict[str, Any]:
    """A Job that downloads `model` (at `revision`, the one the engine's --revision names)
    into the cache claim `name`, on the GPU pool (so a zonal
    volume lands where the engine can run), next to the engine's pod when one runs (a
    ReadWriteOnce volume attaches to one node): required when `colocate` (an engine mounts the
    ReadWriteOnce claim now, so the Job could run nowhere else), preferred otherwise."""
    env: list[dict[str, Any]] = [
        {"name": k, "value": v} for k, v in CACHE_ENV if k == "HF_HOME"
    ] + [
        # hf_xet keeps a chunk cache (10 GB by default) under HF_HOME: not on the cache volume.
        {"name": "HF_XET_CHUNK_CACHE_SIZE_BYTES", "value": "0"},
    ]
    if hf_token:
        env.append(
            {
                "name": "HF_TOKEN",
                "valueFrom": {"secretKeyRef": {"name": hf_token[0], "key": hf_token[1]}},
            }
        )
    metadata = _metadata(job_name, namespace, model, component="model-fetch")
    term = {
        "labelSelector": {"matchLabels": {"app": name}},
        "topologyKey": "kubernetes.io/hostname",
    }
    # The pods are the runtime's (its name), in the model-fetch component.
    pod_labels = metadata["labels"] = labels(name) | {"app.kubernetes.io/component": "model-fetch"}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata,
        "spec": {
            # Each attempt resumes what the previous ones downloaded.
            "backoffLimit": 6,
            "activeDeadlineSeconds": deadline_seconds,
            "template": {
                "metadata": {"labels": pod_labels},
                "spec": {
                    "restartPolicy": "OnFailure",
                    # The pod ends by the same deadline even if its Job is deleted with
                    # orphaned dependents (a Job's default propagation policy).
                    "activeDeadlineSeconds": deadline_seconds,
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": engine_affinity(node_selector)
                            }
                        },
                        # The controller labels the engine's pods `app: <runtime name>`.
                        "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
                        if colocate
                        else {
                            "preferredDuringSchedulingIgnoredDuringExecution": [
                                {"weight": 100, "podAffinityTerm": term}
                            ]
                        },
                    },
                    "tolerations": [dict(t) for t in (tolerations or [GPU_TOLERATION])],
                    "containers": [
                        {
                            "name": "fetch",
                            "image": image,
                            "command": [ENGINE_PYTHON, "-c", FETCH_SCRIPT, model]
                            + ([revision] if revision else []),
                            "env": env,
                            "resources": {
                                "requests": dict(requests),
                                "limits": {"memory": memory_limit},
                            },
                            "volumeMounts": [{"name": "model-cache", "mountPath": CACHE_MOUNT}],
                        }
                    ],
                    "volumes": [
                        {"name": "model-cache", "persistentVolumeClaim": {"claimName": name}}
                    ],
                },
            },
        },
    }


def engine_command(runtime: Mapping[str, Any]) -> list[str]:
    """The `vllm serve` command line the operator builds from a VLLMRuntime (same order as
    its controller), for status: what will actually run."""
    spec = runtime["spec"]
    model, cfg = spec["model"], spec["vllmConfig"]
    args = ["vllm", "serve", model["modelURL"], "--host", "0.0.0.0", "--port", str(cfg["port"])]
    if model.get("enableTool"):
        args.append("--enable-auto-tool-choice")
    if model.get("toolCallParser"):
        args += ["--tool-call-parser", model["toolCallParser"]]
    args.append(
        "--enable-chunked-prefill"
        if cfg.get("enableChunkedPrefill")
        else "--no-enable-chunked-prefill"
    )
    args.append(
        "--enable-prefix-caching"
        if cfg.get("enablePrefixCaching")
        else "--no-enable-prefix-caching"
    )
    if model.get("maxModelLen"):
        args += ["--max-model-len", str(model["maxModelLen"])]
    if model.get("dtype"):
        args += ["--dtype", model["dtype"]]
    if cfg.get("tensorParallelSize"):
        args += ["--tensor-parallel-size", str(cfg["tensorParallelSize"])]
    if cfg.get("gpuMemoryUtilization"):
        args += ["--gpu_memory_utilization", cfg["gpuMemoryUtilization"]]
    return args + list(cfg.get("extraArgs", []))


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
        "metadata": _metadata(name, namespace, model),
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
    *, name: str, namespace: str, key: str, source_name: str, source_namespace: str
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A Secret for the target cluster and the Object references that copy one key into it
    from a Secret on the control plane, so no token is ever written into a manifest."""
    manifest = {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
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
# finalizers) is the API server's or Crossplane's to set, and a server-side apply that
# carries managedFields is rejected.
_DESIRED_METADATA = ("name", "namespace", "generateName", "labels", "annotations")


def desired_from_observed(observed: Mapping[str, Any]) -> dict[str, Any]:
    """An observed object as a desired one: what it says (kind, metadata we set, spec and
    the other content), without status and server-set metadata."""
    out = {k: v for k, v in observed.items() if k not in ("status", "metadata")}
    metadata = observed.get("metadata")
    if isinstance(metadata, Mapping):
        out["metadata"] = {k: metadata[k] for k in _DESIRED_METADATA if k in metadata}
    return out


def usage(
    *, name: str, of: Mapping[str, Any], model_claim: str, replay_deletion: bool = False
) -> dict[str, Any]:
    """A Usage of `of` (apiVersion, kind, resourceRef) by the LLMInference `model_claim`:
    deleting `of` is refused, naming the model, while the model uses it (Crossplane's
    webhook blocks the delete); with `replay_deletion`, a deletion refused meanwhile (its
    XR's, say) goes ahead once the model is gone."""
    api = "inference.devopstoolkit.ai/v1alpha1"
    spec: dict[str, Any] = {
        "of": dict(of),
        "by": {"apiVersion": api, "kind": "LLMInference", "resourceRef": {"name": model_claim}},
    }
    if replay_deletion:
        spec["replayDeletion"] = True
    return {
        "apiVersion": "protection.crossplane.io/v1beta1",
        "kind": "Usage",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/part-of": PART_OF}},
        "spec": spec,
    }


def cluster_usage(*, name: str, cluster: str, model_claim: str) -> dict[str, Any]:
    """A Usage that keeps the InferenceCluster `cluster` while the LLMInference
    `model_claim` runs on it, instead of tearing the cluster down under it."""
    api = "inference.devopstoolkit.ai/v1alpha1"
    return usage(
        name=name,
        of={"apiVersion": api, "kind": "InferenceCluster", "resourceRef": {"name": cluster}},
        model_claim=model_claim,
    )


# --- Simulated engine (engine.simulate) -------------------------------------------------
# The production-stack operator runs /opt/venv/bin/vllm, which the simulator image lacks:
# a simulated model is a Deployment and a Service shaped like the operator's (the engine's
# labels for the router's discovery, a Service on port 80 to the pods' 8000, named after the
# model), so the router, an Ingress and KEDA treat it as they treat a VLLMRuntime.
SIMULATOR_READY_CEL = "has(object.status.availableReplicas) && object.status.availableReplicas >= 1"


def simulator_deployment(
    *,
    name: str,
    namespace: str,
    model: str,
    image: str,
    args: Sequence[str],
    env: Sequence[tuple[str, str]],
    replicas: int | None,
    requests: Mapping[str, str],
    limits: Mapping[str, str],
    node_selector: Mapping[str, str] | None = None,
    pod_labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """llm-d's inference simulator as the engine: CPU only, non-root, ready once it answers
    /health/ready (503 while a --startup-duration runs, like an engine loading weights).
    `pod_labels`: an llm-d model's (its InferencePool selects them), else the engine's."""
    pod_labels = dict(pod_labels or labels(name))
    probe_port = {"port": "http"}
    container: dict[str, Any] = {
        "name": "simulator",
        "image": image,
        "args": list(args),
        "ports": [{"name": "http", "containerPort": ENGINE_PORT, "protocol": "TCP"}],
        # The simulator names its pod in KV-cache events.
        "env": [
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {
                "name": "POD_NAMESPACE",
                "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
            },
            {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            *({"name": k, "value": v} for k, v in env),
        ],
        "resources": {"requests": dict(requests), "limits": dict(limits)},
        "readinessProbe": {
            "httpGet": {"path": "/health/ready", **probe_port},
            "periodSeconds": 2,
            "failureThreshold": 3,
        },
        "livenessProbe": {
            "httpGet": {"path": "/health", **probe_port},
            "periodSeconds": 10,
            "failureThreshold": 3,
        },
        "securityContext": {
            "runAsNonRoot": True,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
        },
    }
    spec: dict[str, Any] = {
        **({"replicas": replicas} if replicas is not None else {}),
        "selector": {"matchLabels": dict(pod_labels)},
        "template": {
            "metadata": {"labels": dict(pod_labels), "annotations": {MODEL_ANNOTATION: model}},
            "spec": {
                "containers": [container],
                **({"nodeSelector": dict(node_selector)} if node_selector else {}),
            },
        },
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(name, namespace, model),
        "spec": spec,
    }


def engine_service(*, name: str, namespace: str, model: str) -> dict[str, Any]:
    """The Service in front of a simulated engine, as the operator makes one for a
    VLLMRuntime: named after it, port 80 to the pods' 8000."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(name, namespace, model),
        "spec": {
            "selector": labels(name),
            "ports": [
                {"name": "http", "port": SERVICE_PORT, "targetPort": ENGINE_PORT, "protocol": "TCP"}
            ],
        },
    }


# --- Autoscaling ------------------------------------------------------------------------


def scaled_object(
    *,
    name: str,
    namespace: str,
    model: str,
    target: Mapping[str, str],
    min_replicas: int,
    max_replicas: int,
    trigger: Mapping[str, Any],
    polling_interval_s: int,
    scale_down_delay_s: int,
    scale_down_policy: Mapping[str, Any],
) -> dict[str, Any]:
    """A KEDA ScaledObject that scales `target` (apiVersion, kind, name; a VLLMRuntime
    through its scale subresource, or a Deployment) on `trigger`.

    Its name is the model's, never `<runtime>-scaledobject`: the production-stack operator
    deletes the ScaledObject of that name on every reconcile of a VLLMRuntime without
    autoscalingConfig (operator/internal/controller/vllmruntime_controller.go)."""
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": _metadata(name, namespace, model, component="autoscaler"),
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
            "triggers": [dict(trigger)],
        },
    }


# --- Multi-node engine (apps.lws) --------------------------------------------------------
# One replica over several nodes: a LeaderWorkerSet group of `nodes` pods, one per node, each
# with that node's GPUs; vLLM 0.17.1's multiprocessing executor spans them (`--nnodes`,
# `--node-rank`, `--master-addr`; the non-zero ranks run `--headless`: vllm/entrypoints/cli/
# serve.py, docs/serving/parallelism_scaling.md). The production-stack operator has no
# multi-node runtime, so the pods are ours, shaped as its are (engine labels on the leader for
# the router, the model cache, /dev/shm, the GPU pool's affinity).
LWS_API = "leaderworkerset.x-k8s.io/v1"
LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
LWS_WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
# Set by LWS in every container: the leader's stable DNS name, the group's size and the pod's
# index in it (kubernetes-sigs/lws v0.10.0 pkg/utils/pod/pod_utils.go).
LWS_LEADER_ADDRESS = "$(LWS_LEADER_ADDRESS)"
LWS_WORKER_INDEX = "$(LWS_WORKER_INDEX)"
LWS_READY_CEL = "has(object.status.readyReplicas) && object.status.readyReplicas >= 1"
VLLM_BINARY = "/opt/venv/bin/vllm"


def vllm_serve_args(
    *,
    model: str,
    tensor_parallel: int,
    nodes: int,
    max_model_len: int | None,
    dtype: str,
    gpu_memory_utilization: float,
    enable_prefix_caching: bool,
    enable_chunked_prefill: bool,
    tool_call_parser: str | None,
    extra_args: Sequence[str],
    port: int = ENGINE_PORT,
) -> list[str]:
    """`vllm serve <model> ...` for a pod the function runs itself (a multi-node replica's,
    an llm-d model's), in the order the operator writes a VLLMRuntime's (engine_command),
    then, over several nodes, the nodes; `$(LWS_*)` are filled by the kubelet from the
    variables LWS sets."""
    args = [model, "--host", "0.0.0.0", "--port", str(port)]
    if tool_call_parser:
        args += ["--enable-auto-tool-choice", "--tool-call-parser", tool_call_parser]
    args.append(
        "--enable-chunked-prefill" if enable_chunked_prefill else "--no-enable-chunked-prefill"
    )
    args.append(
        "--enable-prefix-caching" if enable_prefix_caching else "--no-enable-prefix-caching"
    )
    if max_model_len:
        args += ["--max-model-len", str(max_model_len)]
    args += ["--dtype", dtype, "--tensor-parallel-size", str(tensor_parallel)]
    if nodes > 1:
        args += ["--pipeline-parallel-size", str(nodes)]
    args += ["--gpu-memory-utilization", f"{gpu_memory_utilization:g}"]
    if nodes > 1:
        args += ["--nnodes", str(nodes), "--node-rank", LWS_WORKER_INDEX]
        args += ["--master-addr", LWS_LEADER_ADDRESS]
    return args + list(extra_args)


# --- Pieces of the pods the function runs itself (multi-node groups, llm-d models) -------
# Each pod has its own model cache (a volumeClaimTemplate), filled by an init container
# before vLLM starts, and runs on the GPU pool as the operator's engine pods do.


def secret_env_vars(secret_env: Sequence[tuple[str, tuple[str, str]]]) -> list[dict[str, Any]]:
    """Variables read from Secrets: (variable, (Secret, key)); values never in the manifest."""
    return [
        {"name": var, "valueFrom": {"secretKeyRef": {"name": ref[0], "key": ref[1]}}}
        for var, ref in secret_env
    ]


def engine_env_vars(
    env: Sequence[tuple[str, str]], secrets: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """vLLM's variables: the cache's, the plan's and the claim's, and the Secrets it reads
    (the Hugging Face token only reaches the download: the weights are cached)."""
    return [
        *({"name": k, "value": v} for k, v in CACHE_ENV),
        *({"name": k, "value": v} for k, v in env),
        *(dict(s) for s in secrets if s["name"] != ENGINE_SECRET_ENV),
    ]


def model_fetch_container(
    *,
    image: str,
    python: str,
    fetch_args: Sequence[str],
    fetch_requests: Mapping[str, str],
    fetch_memory_limit: str,
    secrets: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    """The init container that downloads the model into the pod's cache (resumable,
    function/plan/model_fetch.py), with the engine image's own Python and Hugging Face client."""
    return {
        "name": "model-fetch",
        "image": image,
        "command": [python, "-c", FETCH_SCRIPT, *fetch_args],
        "env": [
            {"name": "HF_HOME", "value": dict(CACHE_ENV)["HF_HOME"]},
            {"name": "HF_XET_CHUNK_CACHE_SIZE_BYTES", "value": "0"},
            *(dict(s) for s in secrets if s["name"] == ENGINE_SECRET_ENV),
        ],
        "resources": {"requests": dict(fetch_requests), "limits": {"memory": fetch_memory_limit}},
        "volumeMounts": [{"name": "model-cache", "mountPath": CACHE_MOUNT}],
    }


# A pod's model cache is as large as the model: deleted with the pod, never left behind.
CACHE_RETENTION = {"whenDeleted": "Delete", "whenScaled": "Delete"}


def model_cache_claim_template(cache_size: str, cache_class: str | None) -> dict[str, Any]:
    """The volumeClaimTemplate of a pod's own model cache."""
    return {"metadata": {"name": "model-cache"}, "spec": _cache_claim_spec(cache_size, cache_class)}


def per_pod_caches(
    cache_size: str, cache_class: str | None, shared_claim: str | None
) -> dict[str, Any]:
    """A StatefulSet's or LeaderWorkerSet's own caches: a claim per pod (a cache as large as
    the model: gone with the pod, not left behind), none when they share `shared_claim`."""
    if shared_claim:
        return {}
    return {
        "volumeClaimTemplates": [model_cache_claim_template(cache_size, cache_class)],
        "persistentVolumeClaimRetentionPolicy": dict(CACHE_RETENTION),
    }


def with_shared_cache(pod: dict[str, Any], shared_claim: str | None) -> dict[str, Any]:
    """A pod spec whose `model-cache` volume is the shared claim (else its own template's)."""
    if shared_claim:
        pod["volumes"] = [
            *pod["volumes"],
            {"name": "model-cache", "persistentVolumeClaim": {"claimName": shared_claim}},
        ]
    return pod


# Probes of a vLLM container whose weights are cached before it starts: its startup probe
# allows `startup_budget_s` for loading them, at the operator's period (20 s).
STARTUP_PROBE_PERIOD_S = 20


def engine_probes(port: int, startup_budget_s: int) -> dict[str, Any]:
    health = {"httpGet": {"path": "/health", "port": port}}
    return {
        "startupProbe": {
            **health,
            "periodSeconds": STARTUP_PROBE_PERIOD_S,
            "failureThreshold": max(3, -(-startup_budget_s // STARTUP_PROBE_PERIOD_S)),
        },
        "readinessProbe": {**health, "periodSeconds": 10, "failureThreshold": 3},
        "livenessProbe": {**health, "periodSeconds": 20, "failureThreshold": 3},
    }


def gpu_pod(
    *,
    init: Sequence[Mapping[str, Any]],
    containers: Sequence[Mapping[str, Any]],
    shm_size: str,
    node_selector: Mapping[str, str] | None,
    tolerations: Sequence[Mapping[str, Any]] | None,
    runtime_class: str | None,
) -> dict[str, Any]:
    """A pod spec on the GPU pool: its affinity, tolerations and RuntimeClass, /dev/shm in
    memory, and no Service links."""
    pod: dict[str, Any] = {
        # A Service named like a vLLM setting (`vllm` makes VLLM_PORT) would break vLLM.
        "enableServiceLinks": False,
        "initContainers": [dict(c) for c in init],
        "containers": [dict(c) for c in containers],
        "volumes": [{"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": shm_size}}],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": engine_affinity(node_selector)
                }
            }
        },
        "tolerations": [dict(t) for t in (tolerations or [GPU_TOLERATION])],
    }
    if runtime_class:
        pod["runtimeClassName"] = runtime_class
    return pod


def _lws_pod(
    *,
    role: str,
    image: str,
    args: Sequence[str],
    env: Sequence[Mapping[str, Any]],
    fetch: Mapping[str, Any],
    gpus: int,
    cpu: str,
    memory: str,
    shm_size: str,
    node_selector: Mapping[str, str] | None,
    tolerations: Sequence[Mapping[str, Any]] | None,
    runtime_class: str | None,
    startup_budget_s: int,
) -> dict[str, Any]:
    """The pod template of the leader (role leader: the API server, with probes) or of the
    workers (headless: no server to probe; a failure restarts the whole group)."""
    container: dict[str, Any] = {
        "name": "vllm",
        "image": image,
        "command": [VLLM_BINARY, "serve"],
        "args": list(args) + ([] if role == "leader" else ["--headless"]),
        "env": [dict(e) for e in env],
        "resources": {
            "requests": {"cpu": cpu, "memory": memory, "nvidia.com/gpu": str(gpus)},
            "limits": {"memory": memory, "nvidia.com/gpu": str(gpus)},
        },
        "volumeMounts": [
            {"name": "model-cache", "mountPath": CACHE_MOUNT},
            {"name": "shm", "mountPath": "/dev/shm"},
        ],
    }
    if role == "leader":
        container["ports"] = [{"name": "http", "containerPort": ENGINE_PORT, "protocol": "TCP"}]
        container |= engine_probes(ENGINE_PORT, startup_budget_s)
    return gpu_pod(
        init=[fetch],
        containers=[container],
        shm_size=shm_size,
        node_selector=node_selector,
        tolerations=tolerations,
        runtime_class=runtime_class,
    )


def leader_worker_set(
    *,
    name: str,
    labels_of: str,
    namespace: str,
    model: str,
    image: str,
    nodes: int,
    args: Sequence[str],
    env: Sequence[tuple[str, str]],
    secret_env: Sequence[tuple[str, tuple[str, str]]],
    gpus_per_node: int,
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
    replicas: int | None,
    startup_budget_s: int,
    shared_claim: str | None = None,
) -> dict[str, Any]:
    """A LeaderWorkerSet of groups of `nodes` pods, one replica each: every pod has the
    model cache of its own (volumeClaimTemplates), or all mount `shared_claim` (ReadWriteMany,
    filled by a Job before they start); an init container downloads the model (resumable,
    function/plan/model_fetch.py: on a filled cache it only checks) before vLLM starts on it."""
    secrets = secret_env_vars(secret_env)
    engine_env = [
        # The address the other nodes reach this pod's vLLM at (its own guess is the
        # interface routing to 8.8.8.8: vllm/utils/network_utils.py get_ip).
        {"name": "VLLM_HOST_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        *engine_env_vars(env, secrets),
    ]
    common = {
        "image": image,
        "args": args,
        "env": engine_env,
        "fetch": model_fetch_container(
            image=image,
            python=ENGINE_PYTHON,
            fetch_args=fetch_args,
            fetch_requests=fetch_requests,
            fetch_memory_limit=fetch_memory_limit,
            secrets=secrets,
        ),
        "gpus": gpus_per_node,
        "cpu": cpu,
        "memory": memory,
        "shm_size": shm_size,
        "node_selector": node_selector,
        "tolerations": tolerations,
        "runtime_class": runtime_class,
        "startup_budget_s": startup_budget_s,
    }
    # The router discovers the leader only (it serves the API); workers are headless. The
    # labels are the model's (`labels_of`, its claim), as a one-node engine's are.
    leader_labels = labels(labels_of)
    worker_labels = labels(labels_of) | {"app.kubernetes.io/component": "engine-worker"}
    spec: dict[str, Any] = {
        **({"replicas": replicas} if replicas is not None else {}),
        # Workers start with the leader: its readiness waits for them (LeaderReady would
        # wait forever).
        "startupPolicy": "LeaderCreated",
        "leaderWorkerTemplate": {
            "size": nodes,
            # A pod lost restarts the group: vLLM cannot rejoin a running one.
            "restartPolicy": "RecreateGroupOnPodRestart",
            **per_pod_caches(cache_size, cache_class, shared_claim),
            "leaderTemplate": {
                "metadata": {"labels": leader_labels, "annotations": {MODEL_ANNOTATION: model}},
                "spec": with_shared_cache(_lws_pod(role="leader", **common), shared_claim),
            },
            "workerTemplate": {
                "metadata": {"labels": worker_labels, "annotations": {MODEL_ANNOTATION: model}},
                "spec": with_shared_cache(_lws_pod(role="worker", **common), shared_claim),
            },
        },
    }
    return {
        "apiVersion": LWS_API,
        "kind": "LeaderWorkerSet",
        "metadata": _metadata(labels_of, namespace, model) | {"name": name},
        "spec": spec,
    }


def leader_service(*, name: str, lws: str, namespace: str, model: str) -> dict[str, Any]:
    """The multi-node replica's API: its leaders' port 8000 on port 80, as the operator's
    Service does for a VLLMRuntime (LWS's own headless Service carries the LWS's name)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(name, namespace, model),
        "spec": {
            "selector": {LWS_NAME_LABEL: lws, LWS_WORKER_INDEX_LABEL: "0"},
            "ports": [
                {"name": "http", "port": SERVICE_PORT, "targetPort": ENGINE_PORT, "protocol": "TCP"}
            ],
        },
    }
