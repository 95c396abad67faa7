"""Backend productionStack, a replica larger than one node: a LeaderWorkerSet per replica group
(apps.lws)."""

from __future__ import annotations

import hashlib

from function.backends import resources
from function.backends.base import Backend, Build, Engine
from function.backends.cache import many_pods_cache, per_pod_cache_status, shared_cache_status
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
from function.keys import LWS, LWS_SERVICE
from function.outcome import Condition, Outcome
from function.plan import storage
from function.policy.engine import planned_max_model_len, vllm_args


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
    name = resources.dns_label(spec.name)
    service = resources.dns_label(f"{spec.name}-leader")
    secrets = copy_secrets(spec, facts, target, name, inputs, out)
    remote = target.provider_config is not None
    layout, cache, shared = many_pods_cache(
        spec,
        target,
        plan.nodes * count.asked_high,
        facts,
        plan,
        image,
        secrets.hf_token,
        inputs,
        out,
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
    group = f"{resources.dns_label(spec.name)[:36].rstrip('-')}-{digest}"
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
            resources.leader_worker_set(
                name=group,
                labels_of=name,
                namespace=target.namespace,
                model=spec.model,
                image=image,
                nodes=plan.nodes,
                args=args,
                env=pod_env(spec, plan),
                secret_env=pod_secret_env(spec, secrets),
                gpus_per_node=plan.tensor_parallel_size,
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
                **pod_cache_fill(spec, cache),
            ),
            out,
            suffix=f"lws-{digest}",
            readiness_cel=resources.LWS_READY_CEL,
            watch=True,
        )
    place(
        spec,
        target,
        LWS_SERVICE,
        resources.leader_service(
            name=service, lws=group, namespace=target.namespace, model=spec.model
        ),
        out,
        suffix="leader-service",
    )
    if count.autoscaled and (ready or holding):
        lws_target = {"apiVersion": resources.LWS_API, "kind": "LeaderWorkerSet", "name": group}
        scaler(spec, target, name, count, lws_target, out, service=service)
    ingress(spec, target, name, out, service=service)
    cluster_usage(spec, target, inputs, out)
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
    )


BACKEND = Backend(
    name="productionStack", serves=lambda spec, plan: plan.nodes > 1, build=build_multinode
)
