"""The status stage: the endpoint, whether the engine serves (from what Crossplane observed),
the plan as a person reads it, the replicas, and the XR's readiness."""

from __future__ import annotations

from typing import Any

from function.backends.base import Engine
from function.backends.resources import PART_OF
from function.backends.weights import weights_path
from function.claim.spec import LLMSpec
from function.cluster.target import Target
from function.keys import CLUSTER_USAGE, FETCH, KEDA_USAGE, RUNTIME
from function.kube import dig
from function.model import catalog, sizing
from function.model.facts import facts_status
from function.outcome import Condition, Inputs, Outcome, condition_true, observed_manifest
from function.plan import scaling
from function.plan.concurrency import max_concurrency
from function.policy.names import behind_router, llmd_route


def endpoint_url(spec: LLMSpec, target: Target, service: str) -> str:
    """Where to send requests: the model's own Ingress host, else the cluster's endpoint when
    its router serves the model (requests then name it in `model`), else its Service."""
    if spec.ingress_host:
        return f"http://{spec.ingress_host}"
    if spec.llmd and target.llmd_endpoint:
        return target.llmd_endpoint + (llmd_route(spec, target)[1] or "")
    if behind_router(spec, target) and target.router_endpoint:
        return target.router_endpoint
    return f"http://{service}.{target.namespace}.svc.cluster.local"


def available_replicas(runtime: dict[str, Any] | None, remote: bool) -> int | None:
    status = (
        dig(runtime, "status", "atProvider", "manifest", "status")
        if remote
        else dig(runtime, "status")
    )
    n = dig(status, "availableReplicas")
    if n is None:
        n = dig(status, "readyReplicas")  # a LeaderWorkerSet's groups
    return int(n) if isinstance(n, int | float) and not isinstance(n, bool) else None


# The claim's pods, where the engine runs on the control plane itself (no cluster): why one
# cannot start (the scheduler's words) goes into the Serving condition.
PODS_REQUIREMENT = "engine-pods"


def pods_requirement(spec_name: str, target: Target, out: Outcome) -> None:
    if target.provider_config is None:
        out.requirements[PODS_REQUIREMENT] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "matchLabels": {
                "app.kubernetes.io/name": spec_name,
                "app.kubernetes.io/part-of": PART_OF,
            },
            "namespace": target.namespace,
        }


def unschedulable(pods: list[dict[str, Any]]) -> str:
    """`pod <name> cannot be scheduled: <the scheduler's message>` for the first pod the
    scheduler could not place (its PodScheduled condition), else ""."""
    for pod in sorted(pods, key=lambda p: str(dig(p, "metadata", "name"))):
        for c in dig(pod, "status", "conditions") or []:
            if (
                isinstance(c, dict)
                and c.get("type") == "PodScheduled"
                and c.get("status") == "False"
                and c.get("reason") == "Unschedulable"
            ):
                return (
                    f"pod {dig(pod, 'metadata', 'name')} cannot be scheduled: "
                    f"{str(c.get('message') or '').strip()}"
                )
    return ""


def serving_condition(inputs: Inputs, target: Target, engine: Engine, out: Outcome) -> bool:
    """Whether the engine serves, from what Crossplane observed of it; `engine.current` is
    False while it waits for the model download (none yet, or the previous model's kept)."""
    kind, name, current, key = engine.kind, engine.name, engine.current, engine.key
    observed = inputs.observed.get(key + target.suffix)
    remote = target.provider_config is not None
    available = available_replicas(observed, remote)
    ready = condition_true(observed) if remote else (available is not None and available >= 1)
    where = f"{kind} {target.namespace}/{name}" + (
        f" (Object {observed['metadata'].get('name')})"
        if remote and observed and isinstance(observed.get("metadata"), dict)
        else ""
    )
    if ready:
        out.conditions.append(
            Condition(
                "Serving", "True", "Available", f"{where}: {available or 1} replica(s) serving"
            )
        )
    elif not current:
        out.conditions.append(
            Condition(
                "Serving",
                "False",
                "Downloading",
                f"{where} starts once the model is in its cache (condition ModelCache)",
            )
        )
    elif observed is None:
        out.conditions.append(
            Condition("Serving", "False", "Creating", f"waiting for {where} to be created")
        )
    else:
        model_status = dig(observed, "status", "modelStatus") or dig(
            observed, "status", "atProvider", "manifest", "status", "modelStatus"
        )
        detail = f"{available or 0} replica(s) available" + (
            f", model status {model_status}" if model_status else ""
        )
        stuck = unschedulable(inputs.required.get(PODS_REQUIREMENT) or [])
        if stuck:
            detail += f"; {stuck}"
        out.conditions.append(
            Condition(
                "Serving",
                "False",
                "WaitingForEngine",
                f"waiting for {where} to report an available replica ({detail})"
                + ("" if engine.simulated else "; large models take minutes to download and load"),
            )
        )
    return ready


def topology(plan: sizing.Plan) -> str:
    """One replica's shape: nodes x GPUs, and how vLLM splits the model over them."""
    gpu = plan.gpu.type or "GPU"
    nodes = "1 node" if plan.nodes == 1 else f"{plan.nodes} nodes"
    shape = f"{nodes} x {plan.gpus_per_node} {gpu}"
    tp = plan.tensor_parallel_size
    if plan.data_parallel_size > 1:
        per_node = f" ({plan.data_parallel_local} per node)" if plan.nodes > 1 else ""
        split = f"data parallel {plan.data_parallel_size}{per_node} of tensor parallel {tp}"
    else:
        split = f"tensor parallel {tp}"
        if plan.pipeline_parallel_size > 1:
            split += (
                f" inside each node, pipeline parallel {plan.pipeline_parallel_size} across nodes"
            )
    if plan.expert_parallel:
        split += f", experts split over {plan.expert_parallel_size} ranks (expert parallel)"
    return f"{shape}: {split}"


def plan_status(
    spec: LLMSpec,
    facts: catalog.ModelFacts | None,
    plan: sizing.Plan,
    source: str,
    engine: Engine,
    endpoint: str,
) -> dict[str, Any]:
    g = plan.gpu
    s: dict[str, Any] = {
        "model": spec.model,
        "modelSource": source,
        "gpus": plan.gpus,
        "tensorParallelSize": plan.tensor_parallel_size,
        "pipelineParallelSize": plan.pipeline_parallel_size,
        "dataParallelSize": plan.data_parallel_size,
        "expertParallelSize": plan.expert_parallel_size,
        "nodes": plan.nodes,
        "topology": topology(plan),
        "gpuType": g.type or "assumed 80 GiB-class",
        "gpuMemoryGiB": round(g.memory_gib, 2),
        "gpuAssumed": g.assumed,
        "gpuMemoryUtilization": plan.gpu_memory_utilization,
        "cpu": plan.cpu,
        "memory": plan.memory,
        "shmSize": plan.shm_size,
        **({"resourcesCapped": plan.host_capped} if plan.host_capped else {}),
        "image": engine.image,
        "engineArgs": engine.command,
        **({"simulated": True} if spec.engine.simulate else {}),
    }
    if facts is not None:
        s |= {
            "task": facts.task,
            "architecture": facts.architecture,
            "weightsGiB": round(plan.weights_gib, 1),
            "kvCacheGiB": round(plan.kv_cache_gib, 1),
            "requiredGiB": round(plan.required_gib, 1),
            "availableGiB": round(plan.available_gib, 1),
            "fits": plan.fits,
            # One GPU as vLLM divides it: what it reserves for the KV cache is
            # utilisation x memory - weights - activation peak - non-torch memory.
            "perGPU": {
                "weightsGiB": plan.weights_per_gpu_gib or round(plan.weights_gib / plan.gpus, 2),
                "activationGiB": plan.activation_gib,
                "nonTorchGiB": plan.non_torch_gib,
                "kvCacheGiB": round(plan.kv_cache_gib / plan.gpus, 2),
                "kvSafetyGiB": plan.kv_safety_gib,
                "kvBytesPerToken": plan.kv_bytes_per_token,
            },
            "facts": facts_status(facts, source),
        }
    if plan.engine is not None:
        e = plan.engine
        s["engine"] = {
            "kvCacheDtype": e.kv_cache_dtype,
            "maxNumBatchedTokens": e.max_num_batched_tokens,
            "maxNumSeqs": e.max_num_seqs,
            **({"overrides": list(e.overridden)} if e.overridden else {}),
        }
    if engine.max_model_len:
        s["maxModelLen"] = engine.max_model_len
        if facts is not None and isinstance(engine.max_model_len, int):
            # What vLLM logs as "Maximum concurrency for N tokens per request".
            s["maxConcurrency"] = max_concurrency(facts, plan, engine.max_model_len)
    return {"plan": s, "endpoint": endpoint, "servedModelNames": list(spec.routed_names)}


def memory_condition(facts: catalog.ModelFacts | None, plan: sizing.Plan, out: Outcome) -> None:
    g = plan.gpu
    where = f"{plan.gpus} x {g.memory_gib:g} GiB" + (" (assumed)" if g.assumed else "")
    if facts is None:
        out.conditions.append(
            Condition(
                "GPUMemory",
                "Unknown",
                "NotEstimated",
                f"the model is not in the catalog; {where} as requested, not checked",
            )
        )
    elif plan.fits:
        out.conditions.append(
            Condition(
                "GPUMemory",
                "True",
                "Fits",
                f"needs about {plan.required_gib:.0f} GiB; {where} offer "
                f"{plan.available_gib:.0f} GiB at {plan.gpu_memory_utilization:g} utilisation",
            )
        )
    else:
        message = plan.shortfall or (
            f"needs about {plan.required_gib:.0f} GiB; {where} offer {plan.available_gib:.0f} GiB"
        )
        out.conditions.append(Condition("GPUMemory", "False", "InsufficientMemory", message))


def readiness(inputs: Inputs, target: Target, engine_key: str, serving: bool, out: Outcome) -> None:
    remote = target.provider_config is not None
    for key in out.resources:
        observed = inputs.observed.get(key)
        if key in (CLUSTER_USAGE, KEDA_USAGE):
            out.ready[key] = True  # a Usage reports no readiness of its own
        elif key == engine_key + target.suffix:
            out.ready[key] = serving
        elif key.startswith(FETCH):
            status = dig(observed_manifest(observed, remote), "status", "succeeded")
            out.ready[key] = isinstance(status, int | float) and status >= 1
        elif remote:
            out.ready[key] = condition_true(observed)
        else:
            out.ready[key] = observed is not None


def replicas_status(
    inputs: Inputs, target: Target, engine: Engine, count: scaling.Replicas
) -> dict[str, Any]:
    """status.replicas: what the engine's controller reports (current, ready), what it is
    asked to run now (desired: the fixed count, or KEDA's), and the bounds."""
    manifest = observed_manifest(
        inputs.observed.get(engine.key + target.suffix), target.provider_config is not None
    )
    spec_ = dig(manifest, "spec")
    desired = (
        dig(spec_, "deploymentConfig", "replicas")
        if engine.key == RUNTIME
        else dig(spec_, "replicas")
    )
    status = dig(manifest, "status")
    out: dict[str, Any] = {
        "min": count.low,
        "max": count.high,
        "autoscaled": count.autoscaled,
        "current": observed_count(dig(status, "replicas")) or 0,
        "ready": observed_count(dig(status, "availableReplicas"))
        or observed_count(dig(status, "readyReplicas"))
        or 0,
    }
    wanted = observed_count(desired)
    if wanted is not None:
        out["desired"] = wanted
    elif not count.autoscaled:
        out["desired"] = count.low if engine.current else 0
    if count.capped:
        out["requestedMax"] = count.asked_high
    if engine.pods:
        out["selector"] = ",".join(f"{k}={v}" for k, v in sorted(engine.pods.items()))
    return out


def observed_count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value)


FACTS_FROM = {
    "catalog": "the model catalog's entry for {model}",
    "hub": "the Hugging Face Hub's config.json of {model}",
    "estimated": "an estimate from the name {model}",
    "unknown": "nothing: {model} is unknown, so only the GPU count asked for is used",
}


def weights_status(spec: LLMSpec, facts_source: str, out: Outcome) -> dict[str, Any]:
    """status.plan.weights: where the weights come from (spec.parameters.source), where vLLM
    reads them, and that the plan was sized from the model's id, not from them."""
    assert spec.source is not None
    facts = FACTS_FROM.get(facts_source, facts_source + " ({model})").format(model=spec.model)
    job = out.status_extra.get("cache", {}).get("downloadJob")
    return {
        "source": spec.source.uri,
        "path": weights_path(spec.source),
        **({"copiedBy": f"Job {job}"} if job else {}),
        "facts": f"sized from {facts}, taken as the architecture of the weights in "
        f"{spec.source.uri}; the function does not read them (they are reached from the "
        "cluster), so they must be that model or a fine-tune of it",
    }
