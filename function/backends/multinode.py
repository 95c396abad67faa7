"""Backend productionStack, a replica larger than one node: a LeaderWorkerSet per replica group
(apps.lws)."""

from __future__ import annotations

import hashlib
from typing import Any

from function import kube
from function.backends.base import Backend, Build, Engine
from function.backends.cache import many_pods_cache, per_pod_cache_status, shared_cache_status
from function.backends.cache_objects import (
    ENGINE_PYTHON,
    per_pod_caches,
    with_shared_cache,
)
from function.backends.common import (
    OwnPods,
    copy_secrets,
    hold_or_place,
    place,
    scaler,
    serve_args,
    tail,
)
from function.backends.pods import VLLM_BINARY, VllmPod, vllm_pod
from function.backends.resources import (
    ENGINE_PORT,
    MODEL_ANNOTATION,
    SERVICE_PORT,
    labels,
    object_metadata,
)
from function.backends.weights import fill_for
from function.keys import LWS, LWS_SERVICE
from function.outcome import Condition, Outcome
from function.plan import storage
from function.policy.engine import planned_max_model_len, vllm_args

# One replica over several nodes: a LeaderWorkerSet group of `nodes` pods, one per node, each
# with that node's GPUs; vLLM 0.17.1's multiprocessing executor spans them (`--nnodes`,
# `--node-rank`, `--master-addr`; the non-zero ranks run `--headless`: vllm/entrypoints/cli/
# serve.py, docs/serving/parallelism_scaling.md). The production-stack operator has no
# multi-node runtime, so the pods are ours, shaped as its are (engine labels on the leader for
# the router, the model cache, /dev/shm, the GPU pool's affinity).
LWS_API = "leaderworkerset.x-k8s.io/v1"


LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"


LWS_WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"


LWS_READY_CEL = "has(object.status.readyReplicas) && object.status.readyReplicas >= 1"


def leader_worker_set(
    *,
    name: str,
    labels_of: str,
    namespace: str,
    model: str,
    nodes: int,
    replicas: int | None,
    pod: VllmPod,
) -> dict[str, Any]:
    """A LeaderWorkerSet of groups of `nodes` pods, one replica each, every pod a `pod` on one
    node's GPUs: the leader serves the API (with probes), the workers run `--headless` (no
    server to probe; a failure restarts the whole group). Every pod has the model cache of its
    own (volumeClaimTemplates), or all mount the shared claim (ReadWriteMany, filled by a Job
    before they start); an init container fills it (function/backends/weights.py: on a
    filled cache it only checks) before vLLM starts on it."""
    # The address the other nodes reach this pod's vLLM at (its own guess is the interface
    # routing to 8.8.8.8: vllm/utils/network_utils.py get_ip).
    host_ip = {"name": "VLLM_HOST_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}
    command = [VLLM_BINARY, "serve"]
    leader = vllm_pod(pod, command=command, env_first=[host_ip])
    worker = vllm_pod(
        pod, command=command, args=[*pod.args, "--headless"], port=None, env_first=[host_ip]
    )
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
            **per_pod_caches(pod.cache_size, pod.cache_class, pod.shared_claim),
            "leaderTemplate": {
                "metadata": {"labels": leader_labels, "annotations": {MODEL_ANNOTATION: model}},
                "spec": with_shared_cache(leader, pod.shared_claim),
            },
            "workerTemplate": {
                "metadata": {"labels": worker_labels, "annotations": {MODEL_ANNOTATION: model}},
                "spec": with_shared_cache(worker, pod.shared_claim),
            },
        },
    }
    return {
        "apiVersion": LWS_API,
        "kind": "LeaderWorkerSet",
        "metadata": object_metadata(labels_of, namespace, model) | {"name": name},
        "spec": spec,
    }


def leader_service(*, name: str, lws: str, namespace: str, model: str) -> dict[str, Any]:
    """The multi-node replica's API: its leaders' port 8000 on port 80, as the operator's
    Service does for a VLLMRuntime (LWS's own headless Service carries the LWS's name)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": object_metadata(name, namespace, model),
        "spec": {
            "selector": {LWS_NAME_LABEL: lws, LWS_WORKER_INDEX_LABEL: "0"},
            "ports": [
                {"name": "http", "port": SERVICE_PORT, "targetPort": ENGINE_PORT, "protocol": "TCP"}
            ],
        },
    }


def build_multinode(job: Build, out: Outcome) -> Engine:
    """Compose a replica that spans `plan.nodes` nodes: a LeaderWorkerSet (resources.py) with
    the model cache per pod, the leaders' Service, and as for one node the Ingress, KEDA,
    the Usages, the copied Secrets."""
    spec, target, facts, plan = job.spec, job.target, job.facts, job.plan
    image, count, inputs = job.image, job.count, job.inputs
    name = kube.dns_label(spec.name)
    service = kube.dns_label(f"{spec.name}-leader")
    secrets = copy_secrets(spec, facts, target, name, inputs, out)
    remote = target.provider_config is not None
    fill = fill_for(spec, image, ENGINE_PYTHON, secrets, inputs)
    layout, cache, shared = many_pods_cache(
        spec, target, plan.nodes * count.asked_high, facts, plan, fill, inputs, out
    )
    class_name = layout.class_name
    # The group's name: short (its pods' StatefulSets add suffixes and hash labels), never
    # the claim's (the operator's Service of a one-node runtime has that one), and new when
    # the model cache changes (a StatefulSet's volumeClaimTemplates cannot), so Crossplane
    # replaces the group instead of retrying an update the API server refuses.
    cache_size = storage.quantity(cache.size_gib)
    # Pods on a shared claim have no claim templates: its size is not theirs.
    layout_key = f"shared/{class_name}" if shared else f"{cache_size}/{class_name}"
    digest = hashlib.sha256(layout_key.encode()).hexdigest()[:6]
    group = f"{kube.dns_label(spec.name)[:36].rstrip('-')}-{digest}"
    key = f"{LWS}-{digest}"
    max_len = planned_max_model_len(spec, plan, out)
    args = serve_args(
        spec, facts, plan, max_len, vllm_args(spec, facts, plan, out, api_key_arg=False)
    )
    shared_claim = shared.claim if shared else None
    own = OwnPods(spec, target, image, secrets, fill, class_name, shared_claim)
    observed = inputs.observed.get(key + target.suffix)
    holding = shared is not None and shared.holding(observed, remote)
    ready = shared is None or shared.fetch.done
    # The group serving now stays as it is while the new revision downloads.
    hold_or_place(
        spec,
        target,
        key,
        leader_worker_set(
            name=group,
            labels_of=name,
            namespace=target.namespace,
            model=spec.model,
            nodes=plan.nodes,
            # On a shared cache, no group before the weights are in it.
            replicas=(None if count.autoscaled else count.low) if ready else 0,
            pod=own.pod(plan, args, cache),
        ),
        out,
        holding=holding,
        observed=observed,
        autoscaled=count.autoscaled,
        suffix=f"lws-{digest}",
        readiness_cel=LWS_READY_CEL,
        watch=True,
    )
    place(
        spec,
        target,
        LWS_SERVICE,
        leader_service(name=service, lws=group, namespace=target.namespace, model=spec.model),
        out,
        suffix="leader-service",
    )
    if count.autoscaled and (ready or holding):
        lws_target = {"apiVersion": LWS_API, "kind": "LeaderWorkerSet", "name": group}
        scaler(spec, target, name, count, lws_target, out, service=service)
    tail(spec, target, count, inputs, out, by_key=LWS_SERVICE, ingress_to=name, service=service)
    if shared is not None:
        shared_cache_status(spec, target, layout, cache, shared, out)
    else:
        out.status_extra["cache"] = per_pod_cache_status([("replica", layout, cache)], class_name)
        out.conditions.append(
            Condition(
                "ModelCache",
                "True",
                "PerPod",
                f"each of the {plan.nodes} pods of a replica downloads {spec.model} into its "
                f"own claim ({cache_size}) before vLLM starts on it",
            )
        )
    return Engine(
        kind="LeaderWorkerSet",
        name=group,
        key=key,
        command=["vllm", "serve", *args],
        image=image,
        max_model_len=max_len,
        current=ready or holding,
        simulated=False,
        service=service,
        pods=labels(name),  # the leaders': one per replica
    )


BACKEND = Backend(
    name="productionStack", serves=lambda spec, plan: plan.nodes > 1, build=build_multinode
)
