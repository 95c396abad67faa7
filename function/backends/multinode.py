"""Backend productionStack, a replica larger than one node: a LeaderWorkerSet per replica group
(apps.lws)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from function import kube
from function.backends.base import Backend, Build, Engine
from function.backends.cache import many_pods_cache, per_pod_cache_status, shared_cache_status
from function.backends.cache_objects import (
    CACHE_MOUNT,
    ENGINE_PYTHON,
    per_pod_caches,
    with_shared_cache,
)
from function.backends.common import (
    cluster_usage,
    copy_secrets,
    ingress,
    keda_usage,
    keep_engine,
    no_takeover,
    place,
    pod_cache_fill,
    pod_env,
    pod_secret_env,
    scaler,
    serve_args,
)
from function.backends.pods import (
    VLLM_BINARY,
    engine_env_vars,
    engine_probes,
    gpu_pod,
    secret_env_vars,
)
from function.backends.resources import (
    ENGINE_PORT,
    MODEL_ANNOTATION,
    SERVICE_PORT,
    labels,
    object_metadata,
)
from function.backends.weights import Fill, fill_container, fill_for
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


def _lws_pod(
    *,
    role: str,
    image: str,
    args: Sequence[str],
    env: Sequence[Mapping[str, Any]],
    fetch: Mapping[str, Any],
    fill_volumes: Sequence[Mapping[str, Any]],
    gpus: int,
    cpu: str,
    memory: str,
    shm_size: str,
    node_selector: Mapping[str, str] | None,
    tolerations: Sequence[Mapping[str, Any]] | None,
    runtime_class: str | None,
    startup_budget_s: int,
    pull_secrets: Sequence[str],
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
        pull_secrets=pull_secrets,
        volumes=fill_volumes,
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
    fill: Fill,
    fetch_requests: Mapping[str, str],
    fetch_memory_limit: str,
    node_selector: Mapping[str, str] | None,
    tolerations: Sequence[Mapping[str, Any]] | None,
    runtime_class: str | None,
    replicas: int | None,
    startup_budget_s: int,
    shared_claim: str | None = None,
    pull_secrets: Sequence[str] = (),
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
        "fetch": fill_container(
            fill, name="model-fetch", requests=fetch_requests, memory_limit=fetch_memory_limit
        ),
        "fill_volumes": fill.volumes,
        "gpus": gpus_per_node,
        "cpu": cpu,
        "memory": memory,
        "shm_size": shm_size,
        "node_selector": node_selector,
        "tolerations": tolerations,
        "runtime_class": runtime_class,
        "startup_budget_s": startup_budget_s,
        "pull_secrets": pull_secrets,
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
    spec, target, facts, plan, image, count, inputs = (
        job.spec,
        job.target,
        job.facts,
        job.plan,
        job.image,
        job.count,
        job.inputs,
    )
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
    observed = inputs.observed.get(key + target.suffix)
    holding = shared is not None and shared.holding(observed, remote)
    ready = shared is None or shared.fetch.done
    if holding:
        # The group serving now stays as it is while the new revision downloads.
        keep_engine(target, key, observed, count.autoscaled, out)
    else:
        place(
            spec,
            target,
            key,
            leader_worker_set(
                name=group,
                labels_of=name,
                namespace=target.namespace,
                model=spec.model,
                image=image,
                nodes=plan.nodes,
                args=args,
                env=pod_env(spec, plan),
                secret_env=pod_secret_env(spec, secrets),
                pull_secrets=secrets.pull,
                gpus_per_node=plan.gpus_per_node,
                cpu=plan.cpu,
                memory=plan.memory,
                shm_size=plan.shm_size,
                cache_size=cache_size,
                cache_class=class_name,
                node_selector=target.node_selector,
                tolerations=target.tolerations or None,
                runtime_class=target.runtime_class,
                # On a shared cache, no group before the weights are in it.
                replicas=(None if count.autoscaled else count.low) if ready else 0,
                shared_claim=shared.claim if shared else None,
                fill=fill,
                **pod_cache_fill(spec, cache),
            ),
            out,
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
    ingress(spec, target, name, out, service=service)
    cluster_usage(spec, target, inputs, out, LWS_SERVICE)
    keda_usage(spec, target, count, inputs, out)
    no_takeover(spec, target, inputs, out)
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
