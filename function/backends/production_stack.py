"""Backend productionStack: one VLLMRuntime per model, served by the production-stack operator."""

from __future__ import annotations

from function.backends import resources
from function.backends.base import Backend, Build, Engine
from function.backends.cache import (
    cache_condition,
    cache_layout,
    cache_plan,
    fetch_job,
    place_cache,
)
from function.backends.common import (
    RUNTIME_SCALE_TARGET,
    cluster_usage,
    copy_secrets,
    ingress,
    keda_usage,
    keep_engine,
    no_takeover,
    own_namespace,
    place,
    scaler,
)
from function.cluster.target import (
    dig,
)
from function.keys import CACHE, RUNTIME, SCALER
from function.outcome import Outcome, observed_manifest
from function.plan import storage
from function.policy import engine_args
from function.policy.engine import planned_max_model_len, vllm_args


def build_production_stack(job: Build, out: Outcome) -> Engine:
    """Compose everything for vLLM; the Engine says whether the model is in the cache (until
    then the runtime has no replica, or the engine that serves now is kept while the new
    model downloads)."""
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
    remote = target.provider_config is not None
    own_namespace(spec, target, out)
    secrets = copy_secrets(spec, facts, target, name, inputs, out)
    layout = cache_layout(spec, target, count, inputs)
    cache, claim_gib = cache_plan(spec, target, facts, plan, inputs, layout)
    class_name = layout.class_name
    fetch = fetch_job(spec, target, name, image, secrets.hf_token, inputs)
    observed_runtime = inputs.observed.get(RUNTIME + target.suffix)
    started = dig(
        observed_manifest(observed_runtime, remote), "spec", "deploymentConfig", "replicas"
    )
    # An engine that already started keeps serving its model until the new one is cached.
    holding = not fetch.done and isinstance(started, int) and started >= 1
    env = list(plan.env) + list(spec.engine.env)
    if spec.api_key_secret is not None:
        # The engine's one Secret-sourced variable then holds the API key, not the Hugging
        # Face token: the weights are in the cache (the download Job used the token), so the
        # engine stays offline.
        env.append(("HF_HUB_OFFLINE", "1"))
    runtime = resources.vllm_runtime(
        name=name,
        namespace=target.namespace,
        model=spec.model,
        image=image,
        gpus=plan.gpus,
        cpu=plan.cpu,
        memory=plan.memory,
        shm_size=plan.shm_size,
        dtype=plan.dtype,
        gpu_memory_utilization=plan.gpu_memory_utilization,
        max_model_len=planned_max_model_len(spec, plan, out),
        tool_call_parser=facts.tool_call_parser if facts else None,
        enable_prefix_caching=plan.enable_prefix_caching,
        enable_chunked_prefill=plan.enable_chunked_prefill,
        extra_args=vllm_args(spec, facts, plan, out),
        env=env,
        engine_secret=secrets.api_key if spec.api_key_secret is not None else secrets.hf_token,
        node_selector=target.node_selector,
        tolerations=target.tolerations or None,
        # The claim's size as it is now: the controller rewrites a claim whose size differs.
        cache=(storage.quantity(claim_gib or cache.size_gib), class_name),
        cache_access_mode=layout.access_mode,
        # No pod until the weights are in the cache; then the fixed count, or none written
        # when KEDA owns it.
        replicas=0 if not fetch.done else (None if count.autoscaled else count.low),
        runtime_class=target.runtime_class,
    )
    place_cache(
        spec,
        target,
        CACHE,
        "model-cache",
        name,
        image,
        secrets.hf_token,
        cache,
        layout,
        fetch,
        out,
        # A running engine holds a ReadWriteOnce claim on its node: the Job goes there.
        colocate=holding and layout.access_mode == storage.READ_WRITE_ONCE,
    )
    if holding:
        keep_engine(target, RUNTIME, observed_runtime, count.autoscaled, out)
    else:
        place(
            spec,
            target,
            RUNTIME,
            runtime,
            out,
            suffix="runtime",
            readiness_cel=resources.RUNTIME_READY_CEL,
            watch=True,
        )
    observed_scaler = inputs.observed.get(SCALER + target.suffix)
    if count.autoscaled and fetch.done:
        # KEDA takes over once the model is cached (the runtime then has replicas to scale).
        scaler(spec, target, name, count, RUNTIME_SCALE_TARGET | {"name": name}, out)
    elif count.autoscaled and holding and observed_scaler is not None:
        # The engine kept serving while the new model downloads stays under KEDA.
        out.resources[SCALER + target.suffix] = resources.desired_from_observed(observed_scaler)
    ingress(spec, target, name, out)
    cluster_usage(spec, target, inputs, out)
    keda_usage(spec, target, count, inputs, out)
    no_takeover(spec, target, inputs, out)
    cache_condition(spec, target, name, cache, class_name, fetch, holding, out)
    out.status_extra["cache"] = {
        "claim": name,
        "size": storage.quantity(cache.size_gib),
        **({"storageClass": class_name} if class_name else {}),
        **layout.status(cache.size_gib),
        "downloadJob": fetch.job,
        "downloadDeadlineSeconds": cache.download_deadline_s,
        "loadMiBps": cache.load_rate_mib_s,
        "startSeconds": cache.start_s,
        "startupBudgetSeconds": cache.startup_budget_s,
    }
    given = engine_args.last_value(
        runtime["spec"]["vllmConfig"].get("extraArgs", []), engine_args.MAX_MODEL_LEN
    )
    return Engine(
        kind="VLLMRuntime",
        name=name,
        key=RUNTIME,
        command=resources.engine_command(runtime),
        image=image,
        max_model_len=runtime["spec"]["model"].get("maxModelLen")
        or ("auto" if given == "auto" else None),
        current=fetch.done,
        simulated=False,
    )


BACKEND = Backend(
    name="productionStack", serves=lambda spec, plan: True, build=build_production_stack
)
