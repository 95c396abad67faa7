"""function-auto-ready (crossplane-contrib, v0.7 line) as an in-process step runner.

Upstream `fn.go`: for every desired composed resource that already exists (appears in the
observed state) and whose readiness no earlier step decided (READY_UNSPECIFIED):

1. a standard Kubernetes kind with a built-in health check (`healthchecks/*.go`: kinds
   without meaningful status conditions such as ConfigMap or Secret are ready as soon as
   they exist; Deployment, Service, Ingress, ... follow ArgoCD's health rules) is marked
   READY_TRUE when the check passes;
2. any other resource is marked READY_TRUE when its observed `Ready` condition is `True`.

Nothing is ever marked READY_FALSE, and desired resources that do not exist yet are left
alone. The response carries the request's desired state and context (`response.to`).
The alpha CEL health-check customisation (feature gate off by default) is not offered.
"""

from __future__ import annotations

from collections.abc import Callable

from crossplane.function import resource, response
from crossplane.function.proto.v1 import run_function_pb2 as fnv1

from function.kube import dig as _get

HealthCheck = Callable[[dict], bool]


def _int(obj: dict, *path: str) -> int | None:
    value = _get(obj, *path)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value)


def _replicas(obj: dict) -> int:
    value = _int(obj, "spec", "replicas")
    return 1 if value is None else value


def _conditions(obj: dict) -> list[dict]:
    conds = _get(obj, "status", "conditions")
    return [c for c in conds if isinstance(c, dict)] if isinstance(conds, list) else []


def _condition_true(obj: dict, type_: str) -> bool:
    return any(c.get("type") == type_ and c.get("status") == "True" for c in _conditions(obj))


def _exists(_: dict) -> bool:
    return True


def _deployment(obj: dict) -> bool:
    updated = _int(obj, "status", "updatedReplicas")
    available = _int(obj, "status", "availableReplicas")
    if updated is None or available is None:
        return False
    want = _replicas(obj)
    return want == updated == available and _condition_true(obj, "Available")


def _statefulset(obj: dict) -> bool:
    ready = _int(obj, "status", "readyReplicas")
    current = _int(obj, "status", "currentReplicas")
    if ready is None or current is None:
        return False
    want = _replicas(obj)
    if want != ready or want != current:
        return False
    cur_rev = _get(obj, "status", "currentRevision")
    upd_rev = _get(obj, "status", "updateRevision")
    return isinstance(cur_rev, str) and isinstance(upd_rev, str) and cur_rev == upd_rev


def _daemonset(obj: dict) -> bool:
    values = [
        _int(obj, "status", k)
        for k in (
            "desiredNumberScheduled",
            "numberReady",
            "updatedNumberScheduled",
            "numberAvailable",
        )
    ]
    if any(v is None for v in values):
        return False
    desired, ready, updated, available = values
    return desired == ready and updated == desired and available == desired


def _replicaset(obj: dict) -> bool:
    generation = _int(obj, "metadata", "generation") or 0
    observed = _int(obj, "status", "observedGeneration") or 0
    if observed < generation:
        return False
    if _condition_true(obj, "ReplicaFailure"):
        return False
    return (_int(obj, "status", "availableReplicas") or 0) >= _replicas(obj)


def _load_balanced(obj: dict) -> bool:
    ingress = _get(obj, "status", "loadBalancer", "ingress")
    return isinstance(ingress, list) and len(ingress) > 0


def _service(obj: dict) -> bool:
    if (_get(obj, "spec", "type") or "ClusterIP") != "LoadBalancer":
        return True
    return _load_balanced(obj)


def _pod(obj: dict) -> bool:
    phase = _get(obj, "status", "phase")
    if phase == "Succeeded":
        return True
    if phase != "Running":
        return False
    # A running pod that restarts always is ready when its Ready condition is; one that
    # runs to completion is still progressing.
    return _get(obj, "spec", "restartPolicy") == "Always" and _condition_true(obj, "Ready")


def _pvc(obj: dict) -> bool:
    return _get(obj, "status", "phase") == "Bound"


def _job(obj: dict) -> bool:
    for c in _conditions(obj):
        if c.get("status") != "True":
            continue
        if c.get("type") in ("Failed", "Suspended"):
            return False
        if c.get("type") == "Complete":
            return True
    return False


def _cronjob(obj: dict) -> bool:
    if _get(obj, "spec", "suspend") is True:
        return True
    last_schedule = _get(obj, "status", "lastScheduleTime")
    if not last_schedule:
        return False
    active = _get(obj, "status", "active")
    if isinstance(active, list) and active:
        return True
    last_success = _get(obj, "status", "lastSuccessfulTime")
    if not last_success:
        return False
    # RFC 3339 UTC timestamps compare correctly as strings.
    return str(last_success) >= str(last_schedule)


def _hpa(obj: dict) -> bool:
    for c in _conditions(obj):
        status = c.get("status") == "True"
        kind = c.get("type")
        if status and kind in (
            "FailedGetScale",
            "FailedUpdateScale",
            "FailedGetResourceMetric",
            "InvalidSelector",
        ):
            return False
        if status and kind in ("ScalingActive", "ScalingLimited"):
            return True
    return False


# healthchecks/registry.go and its siblings: (apiVersion, kind) -> check.
HEALTH_CHECKS: dict[tuple[str, str], HealthCheck] = {
    ("v1", "ConfigMap"): _exists,
    ("v1", "Secret"): _exists,
    ("v1", "ServiceAccount"): _exists,
    ("v1", "Namespace"): _exists,
    ("v1", "Service"): _service,
    ("v1", "Pod"): _pod,
    ("v1", "PersistentVolumeClaim"): _pvc,
    ("apps/v1", "Deployment"): _deployment,
    ("apps/v1", "StatefulSet"): _statefulset,
    ("apps/v1", "DaemonSet"): _daemonset,
    ("apps/v1", "ReplicaSet"): _replicaset,
    ("batch/v1", "Job"): _job,
    ("batch/v1", "CronJob"): _cronjob,
    ("autoscaling/v2", "HorizontalPodAutoscaler"): _hpa,
    ("networking.k8s.io/v1", "Ingress"): _load_balanced,
    ("rbac.authorization.k8s.io/v1", "Role"): _exists,
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): _exists,
}


def is_ready(observed: dict) -> bool:
    """Whether function-auto-ready would call this observed composed resource ready."""
    check = HEALTH_CHECKS.get((str(observed.get("apiVersion")), str(observed.get("kind"))))
    if check is not None and check(observed):
        return True
    return _condition_true(observed, "Ready")


def run(req: fnv1.RunFunctionRequest) -> fnv1.RunFunctionResponse:
    """Mark existing desired composed resources READY_TRUE the way function-auto-ready does."""
    rsp = response.to(req)
    for name, desired in rsp.desired.resources.items():
        if desired.ready != fnv1.READY_UNSPECIFIED:
            continue
        if name not in req.observed.resources:
            continue
        observed = resource.struct_to_dict(req.observed.resources[name].resource)
        if is_ready(observed):
            desired.ready = fnv1.READY_TRUE
    return rsp
