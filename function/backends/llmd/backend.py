"""Backend llmd: vLLM StatefulSets (aggregated, or prefill and decode over NIXL), an
InferencePool, its endpoint picker and an HTTPRoute on the cluster's Gateway."""

from __future__ import annotations

from typing import Any

from function import kube
from function.backends import common, resources, weights
from function.backends.base import Backend, Build, Engine
from function.backends.cache import (
    SharedCache,
    cache_plan,
    many_pods_cache,
    per_pod_cache_status,
    shared_cache_status,
)
from function.backends.llmd import objects as llmd
from function.backends.llmd import picker as epp
from function.backends.simulator import place_simulator
from function.claim.spec import P, SpecError
from function.cluster.target import Target
from function.keys import (
    CACHE,
    LLMD_ENGINE,
    LLMD_ENGINES_SERVICE,
    LLMD_PICKER,
    LLMD_PICKER_CONFIG,
    LLMD_PICKER_SERVICE,
    LLMD_POOL,
    LLMD_ROUTE,
    LLMD_ROUTER_IDENTITY,
    SHARED_CACHE,
    SIMULATOR,
)
from function.outcome import Condition, Outcome
from function.plan import storage
from function.plan.disaggregation import RolePlan
from function.policy import llmd_profiles
from function.policy.engine import planned_max_model_len, vllm_args
from function.policy.names import llmd_route


def build_llmd(job: Build, out: Outcome) -> Engine:
    """Compose an llm-d model (function/backends/llmd.py): its vLLM StatefulSets, their Service, the
    InferencePool, the endpoint picker and its identity, the HTTPRoute on the cluster's
    Gateway; and as for the other backends the copied Secrets, KEDA, the Usages."""
    spec, target, facts, count, inputs = job.spec, job.target, job.facts, job.count, job.inputs
    # Aggregated: one kind of pod, with the count the budget allows (KEDA's when autoscaled).
    roles = job.roles or [RolePlan("aggregated", None if count.autoscaled else count.low, job.plan)]
    assert target.llmd_gateway is not None
    simulate = spec.engine.simulate
    image = inputs.simulator_image if simulate else (spec.engine.image or inputs.llmd_engine_image)
    missing = [
        what
        for what, given in (
            ("simulator.image" if simulate else "llmd.engine.image", image),
            ("llmd.endpointPicker.image", inputs.picker_image),
            ("llmd.routingSidecar.image", inputs.sidecar_image),
        )
        if not given
    ]
    if missing:
        raise SpecError(
            f"{P}.backend",
            "llmd",
            f"{P}.backend: the Composition passes no {', '.join(missing)} (its input); "
            "regenerate package/",
        )
    assert image and inputs.picker_image
    disaggregated = spec.disaggregation is not None
    name = kube.dns_label(spec.name)
    picker = kube.dns_label(f"{spec.name}-epp")
    router = kube.dns_label(f"{spec.name}-llm-d")
    engines = kube.dns_label(f"{spec.name}-engines")
    meta = {"namespace": target.namespace, "model": spec.model, "labels_of": name}
    secrets = common.copy_secrets(spec, facts, target, name, inputs, out)
    class_name = spec.storage.class_name or target.storage_class
    # Both sides of a disaggregated model take the requests either may get: the shorter
    # context of the two.
    contexts = [planned_max_model_len(spec, r.plan, out) for r in roles]
    max_len = min((c for c in contexts if c), default=None)
    if disaggregated and max_len and len(set(contexts)) > 1:
        short = roles[contexts.index(max_len)]
        out.notes.append(
            f"{P}.disaggregation: both sides serve a context of {max_len} tokens, what one "
            f"{short.role} pod's KV cache holds ({short.plan.gpus} GPU(s)); more GPUs there "
            f"({P}.disaggregation.{short.role}.gpu) serve longer prompts"
        )
    main: tuple[str, str, list[str]] | None = None
    budgets = []
    caches: list[tuple[str, storage.Layout, storage.CachePlan]] = []
    if simulate:
        # The simulator in place of vLLM, labelled as the pool's pods (no cache: nothing is
        # downloaded).
        sim = kube.dns_label(f"{spec.name}-sim")
        args = place_simulator(
            spec,
            target,
            sim,
            roles[0].plan,
            image,
            count,
            max_len,
            out,
            pod_labels=llmd.role_labels(name, "aggregated"),
        )
        main = (sim, SIMULATOR, ["llm-d-inference-sim", *args])
        roles = []
    remote = target.provider_config is not None
    # vllm/vllm-openai runs vLLM from its system Python.
    fill = weights.fill_for(spec, image, "python3", secrets, inputs)
    shared: SharedCache | None = None
    held = False
    if roles:
        # Every role reads the same weights: one shared claim for all of them, or one each.
        pods = sum(r.replicas if r.replicas is not None else count.asked_high for r in roles)
        layout, _, shared = many_pods_cache(
            spec, target, pods, facts, roles[0].plan, fill, inputs, out
        )
        class_name = layout.class_name
    ready = shared is None or shared.fetch.done
    own = common.OwnPods(
        spec, target, image, secrets, fill, class_name, shared.claim if shared else None
    )
    for r in roles:
        cache, _ = cache_plan(
            spec, target, facts, r.plan, inputs, layout, SHARED_CACHE if shared else CACHE
        )
        cache_size = storage.quantity(cache.size_gib)
        group = llmd.group_name(name, r.role, cache_size, class_name, shared=shared is not None)
        key = f"{LLMD_ENGINE}-{r.role}-{group.rsplit('-', 1)[-1]}"
        extra = vllm_args(spec, facts, r.plan, out, api_key_arg=False)
        if disaggregated:
            extra = ["--kv-transfer-config", llmd.kv_transfer_config(r.role), *extra]
        port = llmd.DECODE_VLLM_PORT if r.role == "decode" else resources.ENGINE_PORT
        args = common.serve_args(spec, facts, r.plan, max_len, extra, port=port)
        if r.role in ("aggregated", "decode"):
            main = (group, key, ["vllm", "serve", *args])
        observed = inputs.observed.get(key + target.suffix)
        if shared is not None and shared.holding(observed, remote):
            # Pods serving now stay as they are while a new revision downloads.
            common.keep_engine(target, key, observed, r.replicas is None, out)
            held = True
            continue
        common.place(
            spec,
            target,
            key,
            llmd.engine_statefulset(
                name=group,
                role=r.role,
                sidecar_image=inputs.sidecar_image,
                service=engines,
                pool=name,
                service_account=router if r.role == "decode" else None,
                # On a shared cache, no pod before the weights are in it.
                replicas=r.replicas if ready else 0,
                rdma_resource=target.rdma_resource,
                pod=own.pod(r.plan, args, cache),
                **meta,
            ),
            out,
            suffix=f"{r.role}-{group.rsplit('-', 1)[-1]}",
            readiness_cel=llmd.ENGINE_READY_CEL,
            watch=True,
        )
        budgets.append(f"{r.replicas or 'KEDA'} x {r.role} ({cache_size} each)")
        pods = r.replicas if r.replicas is not None else count.high
        caches.append((r.role, storage.per_pod_layout(pods, class_name), cache))
    assert main is not None
    if shared is not None:
        plan_ = cache_plan(spec, target, facts, roles[0].plan, inputs, layout, SHARED_CACHE)[0]
        shared_cache_status(spec, target, layout, plan_, shared, out)
    elif caches:
        note = "" if target.shared_storage else " (the cluster publishes no shared class)"
        out.status_extra["cache"] = per_pod_cache_status(caches, class_name, note)
    common.place(
        spec,
        target,
        LLMD_ENGINES_SERVICE,
        llmd.engines_service(name=engines, **meta),
        out,
        suffix="engines",
    )
    for key, manifest in zip(
        LLMD_ROUTER_IDENTITY, epp.router_identity(name=router, **meta), strict=True
    ):
        common.place(spec, target, key, manifest, out, suffix=key)
    config = epp.epp_config_text(spec.llmd_profile, disaggregated)
    common.place(
        spec,
        target,
        LLMD_PICKER_CONFIG,
        epp.epp_config_map(name=picker, text=config, **meta),
        out,
        suffix="epp-config",
    )
    common.place(
        spec,
        target,
        LLMD_PICKER,
        epp.epp_deployment(
            name=picker,
            image=inputs.picker_image,
            pool=name,
            service_account=router,
            config_map=picker,
            config=config,
            **meta,
        ),
        out,
        suffix="epp",
        readiness_cel=epp.EPP_READY_CEL,
    )
    common.place(
        spec,
        target,
        LLMD_PICKER_SERVICE,
        epp.epp_service(name=picker, **meta),
        out,
        suffix="epp-service",
    )
    common.place(
        spec,
        target,
        LLMD_POOL,
        epp.inference_pool(name=name, picker=picker, **meta),
        out,
        suffix="pool",
    )
    host, prefix = llmd_route(spec, target)
    common.place(
        spec,
        target,
        LLMD_ROUTE,
        epp.http_route(
            name=name,
            pool=name,
            gateway=target.llmd_gateway,
            host=host,
            path_prefix=prefix,
            **meta,
        ),
        out,
        suffix="route",
        readiness_cel=epp.ROUTE_READY_CEL,
    )
    group, key, command = main
    if count.autoscaled and (ready or held):
        kind = "Deployment" if simulate else "StatefulSet"
        scaled = {"apiVersion": "apps/v1", "kind": kind, "name": group}
        common.scaler(spec, target, name, count, scaled, out, service=engines)
    common.tail(spec, target, count, inputs, out, by_key=LLMD_ENGINES_SERVICE)
    if shared is None:
        out.conditions.append(
            Condition(
                "ModelCache",
                "True",
                "Simulated" if simulate else "PerPod",
                f"{P}.engine.simulate: llm-d's inference simulator answers for {spec.model}; "
                "nothing is downloaded"
                if simulate
                else f"each vLLM pod downloads {spec.model} into its own claim before vLLM starts "
                f"({', '.join(budgets)})",
            )
        )
    gw_ns, gw_name = target.llmd_gateway
    out.status_extra["backend"] = "llmd"
    out.llmd = {
        "profile": spec.llmd_profile,
        "scorers": dict(llmd_profiles.data()["profiles"][spec.llmd_profile]["scorers"]),
        "inferencePool": name,
        "endpointPicker": picker,
        "httpRoute": name,
        "gateway": f"{gw_ns}/{gw_name}",
        **({"host": host} if host else {"path": prefix}),
    }
    if disaggregated:
        out.status_extra["disaggregation"] = pd_status(roles, target, max_len)
    return Engine(
        kind="StatefulSet",
        name=group,
        key=key,
        command=command,
        image=image,
        max_model_len=max_len,
        current=ready or held,
        simulated=simulate,
        pods=None if disaggregated else llmd.role_labels(name, "aggregated"),
    )


def pd_status(roles: list[RolePlan], target: Target, max_len: int | None) -> dict[str, Any]:
    """status.plan.disaggregation: each side's pods, GPUs and KV cache, and the transfer."""
    out: dict[str, Any] = {
        "gpus": sum((r.replicas or 1) * r.plan.gpus for r in roles),
        "kvTransfer": f"{llmd.KV_CONNECTOR} (NIXL) over RDMA"
        + (f" ({target.rdma_resource})" if target.rdma_resource else ""),
    }
    for r in roles:
        out[r.role] = {
            "replicas": r.replicas,
            "gpus": r.plan.gpus,
            "kvCacheGiB": round(r.plan.kv_cache_gib, 1),
            **({"maxModelLen": max_len} if max_len else {}),
        }
    return out


BACKEND = Backend(name="llmd", serves=lambda spec, plan: spec.llmd, build=build_llmd)
