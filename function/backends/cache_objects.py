"""The model cache's objects: its claims (one, or a template per pod), the fetch Job and the
init container that fill them."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from function.backends.resources import GPU_TOLERATION, engine_affinity, labels, object_metadata
from function.plan import model_fetch

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


# metav1.FinalizerDeleteDependents: what a foreground deletion puts on an object.
FOREGROUND_DELETION = "foregroundDeletion"

# Ready means the download finished.
JOB_DONE_CEL = "has(object.status.succeeded) && object.status.succeeded >= 1"


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
        "metadata": object_metadata(name, namespace, model, component="model-cache"),
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


def fetch_job_name(name: str, identity: Sequence[Any]) -> str:
    """The download Job's name: a digest of what it downloads with (function/backends/
    weights.py Fill.identity), so a change runs a new Job (a Job's template cannot change)."""
    digest = hashlib.sha256(json.dumps(list(identity)).encode()).hexdigest()[:8]
    return f"{name[:47].rstrip('-')}-fetch-{digest}"


def model_fetch_job(
    *,
    name: str,
    job_name: str,
    namespace: str,
    model: str,
    container: Mapping[str, Any],
    volumes: Sequence[Mapping[str, Any]],
    node_selector: Mapping[str, str] | None,
    tolerations: Sequence[Mapping[str, Any]] | None,
    deadline_seconds: int,
    colocate: bool = False,
    pull_secrets: Sequence[str] = (),
) -> dict[str, Any]:
    """A Job whose `container` (function/backends/weights.py) fills the cache claim `name`
    (reading `volumes` beside it), on the GPU pool (so a zonal volume lands where the engine
    can run), next to the engine's pod when one runs (a ReadWriteOnce volume attaches to one
    node): required when `colocate` (an engine mounts the ReadWriteOnce claim now, so the Job
    could run nowhere else), preferred otherwise. `pull_secrets`: its image's registry
    credentials."""
    metadata = object_metadata(job_name, namespace, model, component="model-fetch")
    # Deleted in the foreground whoever deletes it: provider-kubernetes deletes with the API's
    # default propagation, which for batch/v1 Jobs orphans the pods, and a scheduled orphan
    # keeps the cache claim in use (pvc-protection), so the claim never finishes Terminating.
    # The API server reads this finalizer as the propagation policy when the request names
    # none (apiserver's registry store, shouldOrphanDependents), and the garbage collector
    # removes it once the pods are gone.
    metadata["finalizers"] = [FOREGROUND_DELETION]
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
                    # orphaned dependents (`kubectl delete --cascade=orphan`).
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
                    "containers": [dict(container)],
                    "volumes": [
                        {"name": "model-cache", "persistentVolumeClaim": {"claimName": name}},
                        *(dict(v) for v in volumes),
                    ],
                    # Its image may be private (the engine's, a modelcar).
                    **(
                        {"imagePullSecrets": [{"name": n} for n in pull_secrets]}
                        if pull_secrets
                        else {}
                    ),
                },
            },
        },
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
