"""The plan stage for one kind of pod: the model sized on the target's GPUs and nodes
(function/model/sizing.py), the engine settings it is sized with, and a simulated model's
plan."""

from __future__ import annotations

import dataclasses

from function.claim.spec import LLMSpec, P, SpecError
from function.cluster.target import Target
from function.model import adapters, catalog, catalog_lookup, node_fit, sizing, vllm_memory
from function.model.facts import as_run, model_facts, require_hub_token
from function.outcome import Inputs, Outcome
from function.plan import storage


def engine_settings(spec: LLMSpec) -> vllm_memory.EngineSettings:
    e = spec.engine
    given = {
        "--gpu-memory-utilization": e.gpu_memory_utilization,
        "--kv-cache-dtype": e.kv_cache_dtype,
        "--max-num-batched-tokens": e.max_num_batched_tokens,
        "--max-num-seqs": e.max_num_seqs,
    }
    return vllm_memory.EngineSettings(
        gpu_memory_utilization=e.gpu_memory_utilization or vllm_memory.GPU_MEMORY_UTILIZATION,
        kv_cache_dtype=e.kv_cache_dtype or "auto",
        max_num_batched_tokens=e.max_num_batched_tokens,
        max_num_seqs=e.max_num_seqs,
        overridden=tuple(flag for flag, value in given.items() if value is not None),
    )


def plan_model(
    spec: LLMSpec, target: Target, inputs: Inputs, out: Outcome
) -> tuple[catalog.ModelFacts | None, sizing.Plan, str]:
    facts, source = model_facts(spec, inputs, out)
    if facts is None and spec.gpu is None:
        near = catalog_lookup.near_id(spec.model)
        raise SpecError(
            f"{P}.model",
            spec.model,
            f"{P}.model: {spec.model} is not in the model catalog, the Hugging Face Hub could "
            "not describe it, and its name carries no size (like 7B, 8x7B or 30B-A3B) to "
            "estimate from; set spec.parameters.gpu to the number of GPUs it needs"
            + (f", or did you mean {near}?" if near else ""),
        )
    if spec.adapters and not spec.engine.simulate:
        require_hub_token(spec, out)  # fn.py then asks for each adapter_config.json
    lora = adapters.plan_adapters(
        spec.adapters,
        spec.model,
        facts,
        adapters.configs_from(inputs.adapter_hub),
        out.warnings,
    )
    engine = engine_settings(spec)
    if lora is not None:
        engine = dataclasses.replace(engine, lora=lora.shape)
    facts = as_run(spec, facts)
    try:
        if facts is None:
            plan = sizing.plan_without_facts(spec.gpu, target.gpu)
        else:
            plan = sizing.plan(
                facts,
                spec.gpu,
                target.gpu,
                engine,
                target.span,
                expert=spec.expert_parallel,
                one_pod=spec.llmd,
            )
    except sizing.SizingError as e:
        message = e.render(one_pod=spec.llmd)
        if e.names_field:
            raise SpecError(e.field, e.value, message) from e
        # The GPU count was the function's choice: the model is what does not fit.
        field = e.field if spec.gpu is not None else f"{P}.model"
        raise SpecError(field, spec.model, f"{field}: {message}") from e
    if target.pod_cpu_millicores and target.pod_memory_mib:
        # Leave room for the model-cache Job, which may run beside the engine.
        plan = node_fit.fit_to_node(
            plan,
            target.pod_cpu_millicores - storage.FETCH_CPU_MILLICORES,
            target.pod_memory_mib - storage.FETCH_MEMORY_MIB,
            f"one {target.instance_type or 'GPU node'} of {target.cluster or 'the cluster'}",
        )
    if lora is not None and plan.nodes > 1:
        # A replica over several nodes is a LeaderWorkerSet whose pods start with
        # HF_HUB_OFFLINE=1 from weights their init containers fetched (backends/multinode.py):
        # nothing fetches the adapters, and vLLM cannot download them offline.
        raise SpecError(
            f"{P}.adapters",
            len(lora.adapters),
            f"{P}.adapters: {spec.model} runs over {plan.nodes} nodes (a LeaderWorkerSet), "
            "whose engines start offline from the model the init containers fetched; nothing "
            "fetches the adapters there. Serve the adapters with a model that fits one node, "
            "or remove adapters",
        )
    if lora is not None:
        plan = dataclasses.replace(plan, lora=lora)
        out.status_extra["adapters"] = adapters.lora_status(
            lora, plan.lora_gib if facts is not None else None
        )
    if facts is None:
        return None, plan, "unknown"
    if plan.shortfall and spec.gpu is not None and not target.gpu.assumed and not facts.estimated:
        # The cluster's GPU and the model's size are both known: the engine would fail to
        # start (out of memory, or no room for one sequence of its context).
        raise SpecError(
            f"{P}.gpu",
            spec.gpu,
            f"{P}.gpu: {spec.gpu} cannot hold {spec.model} on {target.cluster or 'this cluster'}: "
            f"{plan.shortfall}",
        )
    return facts, plan, source


def plan_simulated(
    spec: LLMSpec, target: Target, inputs: Inputs, out: Outcome
) -> tuple[catalog.ModelFacts | None, sizing.Plan, str]:
    """The plan of a simulated model: the one vLLM would get, for status; what would stop
    vLLM (the model does not fit, its size is unknown) is a warning, since the simulator
    needs no GPU."""
    try:
        return plan_model(spec, target, inputs, out)
    except SpecError as e:
        gpus = min(spec.gpu or 1, target.gpu.per_node)
        out.warnings.append(
            f"{P}.engine.simulate: the simulator serves it, but vLLM would not: {e.message}"
        )
        return None, sizing.plan_without_facts(gpus, target.gpu), "unknown"
